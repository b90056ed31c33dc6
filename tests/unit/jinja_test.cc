// The Jinja engine feature by feature: whitespace control (trim_blocks, lstrip_blocks, '-', '+'),
// loops and their variables, scoping and namespace(), filters, tests, methods, operators, macros,
// and the errors. Each expected output is what Python's Jinja2 3.1 renders for the same template
// and variables in Hugging Face's configuration (sandboxed, trim_blocks, lstrip_blocks,
// loopcontrols, json.dumps as tojson).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace hearth::text::jinja {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* variables;  // JSON object
  const char* expected;
};

std::string render(const std::string& source, const std::string& variables = "{}") {
  return Template(source).render(parse_json(variables), std::tm{});
}

TEST(Jinja, RendersAsJinja2Does) {
  const Case cases[] = {
      {"whitespace",
       "  {% if true %}\n  a\n  {% endif %}\nb {{- ' c ' -}} d\n{#- note -#}\n e",
       "{}",
       "  a\nb c de"},
      {"lstrip_plus",
       "x\n  {%+ if true %}y{% endif %}\n  {%- if true %}z{% endif %}",
       "{}",
       "x\n  yz"},
      {"loop",
       "{% for x in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.l"
       "ength }}{{ '!' if loop.first }}{{ '.' if loop.last }}{{ loop.previtem or '-' }}{{ lo"
       "op.nextitem or '-' }} {% endfor %}",
       "{\"items\": [\"a\", \"b\", \"c\"]}",
       "1/0/3/3!-b 2/1/2/3ac 3/2/1/3.b- "},
      {"loop_filter_else",
       "{% for k, v in d.items() if k != 'b' %}{{ k }}={{ v }};{% else %}none{% endfor %}|{%"
       " for x in [] %}x{% else %}empty{% endfor %}",
       "{\"d\": {\"a\": 1, \"b\": 2, \"c\": [1, \"x\"]}}",
       "a=1;c=[1, 'x'];|empty"},
      {"break_continue",
       "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i > 3 %}{% bre"
       "ak %}{% endif %}{{ i }}{% endfor %}",
       "{}",
       "023"},
      {"namespace_scope",
       "{% set ns = namespace(n=0, s='') %}{% set outer = 'o' %}{% for i in [1,2,3] %}{% set"
       " ns.n = ns.n + i %}{% set outer = 'changed' %}{% endfor %}{{ ns.n }} {{ outer }}",
       "{}",
       "6 o"},
      {"filters",
       "{{ '  hi  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ [1,2,3] | length }}"
       "|{{ 'héllo' | length }}|{{ none | default('d') }}|{{ undefined_var | default('u') }}"
       "|{{ '' | default('e', true) }}|{{ [3,1] | join(', ') }}|{{ 'hello world' | title }}|"
       "{{ 'hello' | capitalize }}|{{ 'a-b-c' | replace('-', '+') }}",
       "{}",
       "hi|ABC|abc|3|5|None|u|e|3, 1|Hello World|Hello|a+b+c"},
      {"tojson",
       "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'ü\"\\n' | tojson }}|{{ [] | tojson }"
       "}|{{ 1.5 | tojson }}",
       "{\"d\": {\"name\": \"f\", \"args\": {\"x\": [1, 2.0, true, null]}, \"e\": {}}}",
       "{\"name\": \"f\", \"args\": {\"x\": [1, 2.0, true, null]}, \"e\": {}}|{\n  \"name\":"
       " \"f\",\n  \"args\": {\n    \"x\": [\n      1,\n      2.0,\n      true,\n      null"
       "\n    ]\n  },\n  \"e\": {}\n}|\"ü\\\"\\n\"|[]|1.5"},
      {"indent",
       "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, first=true) }}|{{ 'x\\n' | i"
       "ndent(2) }}|{{ 'x\\n\\ny' | indent(2, blank=true) }}",
       "{}",
       "a\n  b\n\n  c|    a\n    b|x\n|x\n  \n  y"},
      {"select",
       "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',"
       "') }}|{{ msgs | rejectattr('role', 'equalto', 'user') | list | length }}|{{ [1, 0, 2"
       "] | select | list }}|{{ ['a','b'] | reject('equalto', 'a') | list }}",
       "{\"msgs\": [{\"role\": \"user\", \"content\": \"u1\"}, {\"role\": \"assistant\", \"c"
       "ontent\": \"a1\"}, {\"role\": \"user\", \"content\": \"u2\"}]}",
       "u1,u2|1|[1, 2]|['b']"},
      {"slices",
       "{{ s[::-1] }}|{{ s[1:3] }}|{{ s[-2:] }}|{{ l[1:] }}|{{ l[:-1] }}|{{ l[::2] }}|{{ l[-"
       "1] }}|{{ s[0] }}",
       "{\"s\": \"héllo\", \"l\": [1, 2, 3, 4]}",
       "olléh|él|lo|[2, 3, 4]|[1, 2, 3]|[1, 3]|4|h"},
      {"tests",
       "{{ x is defined }}{{ y is defined }}{{ y is not defined }}{{ n is none }}{{ s is str"
       "ing }}{{ l is iterable }}{{ d is mapping }}{{ 3 is odd }}{{ 4 is even }}{{ 5 is numb"
       "er }}{{ s is not string }}",
       "{\"x\": 1, \"n\": null, \"s\": \"a\", \"l\": [1], \"d\": {}}",
       "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalse"},
      {"methods",
       "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b"
       " '.split() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith('bc') }}|{{ 'a</think>b"
       "'.split('</think>')[-1] }}|{{ d.get('k', 'none') }}|{{ d.keys() | list }}",
       "{\"d\": {\"a\": 1}}",
       "a b|a|['a', 'b', '', 'c']|['a', 'b']|True|True|b|none|['a']"},
      {"operators",
       "{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2"
       " ** 10 }}|{{ 'a' ~ 1 ~ none }}|{{ 'ab' in 'cabd' }}|{{ 2 not in [1, 3] }}|{{ 'k' in "
       "d }}|{{ 1 == 1.0 }}|{{ 'a' < 'b' }}|{{ not true or false }}|{{ none or 'x' }}|{{ 0 a"
       "nd 'y' }}|{{ 'ab' * 2 }}",
       "{\"d\": {\"k\": 1}}",
       "7|3|-4|1|2|3.5|1024|a1None|True|True|True|True|True|False|x|0|abab"},
      {"printing",
       "{{ [1, 'a', none, true] }}|{{ {'a': 'x', 'b': [1]} }}|{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ n"
       "one }}|{{ undefined_thing }}|{{ \"it's\" }}",
       "{}",
       "[1, 'a', None, True]|{'a': 'x', 'b': [1]}|1.0|0.30000000000000004|None||it's"},
      {"macro",
       "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a'"
       ") }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}",
       "{}",
       "Hi a! Hi b? Hi c."},
      {"set_block",
       "{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]",
       "{}",
       "[a2b]"},
      {"cond",
       "{{ 'y' if 1 > 2 else 'n' }}{{ 'z' if false }}!",
       "{}",
       "n!"},
      {"strings",
       "{{ 'a\\tb\\\\c\\'d' }}|{{ \"x\" \"y\" }}|{{ '\\u00e9' }}",
       "{}",
       "a\tb\\c'd|xy|é"},
      {"elif",
       "{% for i in [1,2,3] %}{% if i == 1 %}one{% elif i == 2 %}two{% else %}other{% endif "
       "%} {% endfor %}",
       "{}",
       "one two other "},
      {"dict_literal",
       "{% set m = {'string': 'str', 'int': 'int'} %}{{ m['string'] }}{{ m.int }}{{ m['missi"
       "ng'] is defined }}{% for k, v in m | items %}{{ k }}{{ v }}{% endfor %}",
       "{}",
       "strintFalsestringstrintint"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(render(c.source, c.variables), c.expected) << c.name;
  }
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    render("{% if true %}{{ raise_exception('no system role') }}{% endif %}");
    ADD_FAILURE() << "no exception";
  } catch (const TemplateRaised& e) {
    EXPECT_STREQ(e.what(), "no system role");
  }
}

TEST(Jinja, StrftimeNowFormatsTheGivenDate) {
  std::tm day{};
  day.tm_year = 2026 - 1900;
  day.tm_mon = 0;
  day.tm_mday = 15;
  EXPECT_EQ(Template("{{ strftime_now('%d %b %Y') }}").render(Value::dict(), day), "15 Jan 2026");
}

// What the engine cannot do is an Error naming the line, never a crash or a silent guess.
TEST(Jinja, ErrorsNameTheLine) {
  const auto error_of = [](const std::string& source, const std::string& vars = "{}") {
    try {
      render(source, vars);
    } catch (const TemplateRaised&) {
      return std::string("raised");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("a\n{{ x | frobnicate }}").find("line 2: unknown filter 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(error_of("{% if x %}never closed").find("expected {% endif %}"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 +  }}").find("line 1: expected an expression"), std::string::npos);
  EXPECT_NE(error_of("{{ 'open").find("string is not closed"), std::string::npos);
  EXPECT_NE(error_of("{{ x").find("tag is not closed"), std::string::npos);
  EXPECT_NE(error_of("{{ missing.attr }}").find("'attr' of an undefined value"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand types for +"), std::string::npos);
  EXPECT_NE(error_of("{% call foo() %}{% endcall %}").find("unsupported tag 'call'"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{% set x.y = 1 %}", R"({"x": {}})").find("not a namespace"),
            std::string::npos);
}

// Templates that would recurse without end, or nest deeper than any real one, are Errors, not
// stack overflows.
TEST(Jinja, RecursionAndNestingAreBounded) {
  EXPECT_THROW(render("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}"), Error);
  EXPECT_THROW(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
               Error);
  EXPECT_THROW(render("{{ " + std::string(100000, '-') + "1 }}"), Error);
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "{% if true %}";
  EXPECT_THROW(render(deep), Error);
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), Error);
  // The sandbox's view of a dict: its methods, not its keys, answer to their names.
  EXPECT_EQ(render("{{ d.items is defined }}{{ d.update is defined }}{{ d['items'] }}",
                   R"({"d": {"items": 1, "update": 2}})"),
            "TrueFalse1");
}

// Content strings keep their ranges through the operations templates apply to message text;
// operations that do not track ranges mark their whole result.
TEST(Jinja, ContentRangesTravelThroughTheRendering) {
  const Value vars = parse_json(R"({"m": {"content": " ab ", "k": {"x": 1}}, "t": "T"})");
  Dict d;
  for (const auto& [k, v] : vars.as_dict().items) d.set(k, k == "m" ? mark_content(v) : v);
  const auto pieces = [&](const std::string& source) {
    const Template::Rendered r = Template(source).render_with_content(Value::dict(d), std::tm{});
    std::vector<std::string> out;
    for (const auto& [b, e] : r.content) out.push_back("[" + r.text.substr(b, e - b) + "]");
    return r.text + " " + (out.empty() ? "" : out[0]) + (out.size() > 1 ? out[1] : "");
  };
  EXPECT_EQ(pieces("<{{ m.content | trim }}>"), "<ab> [ab]");
  EXPECT_EQ(pieces("{{ '<' + m.content.strip() + '>' ~ t }}"), "<ab>T [ab]");
  EXPECT_EQ(pieces("{% macro f(x) %}({{ x }}){% endmacro %}{{ f(m.content) }}"), "( ab ) [ ab ]");
  EXPECT_EQ(pieces("{{ m.content.split('b')[0] }}|"), " a| [ a]");
  EXPECT_EQ(pieces("{{ m.k | tojson }}"), "{\"x\": 1} [{\"x\": 1}]");
  EXPECT_EQ(pieces("{% for k, v in m | items %}{{ k }};{% endfor %}"), "content;k; [content][k]");
  EXPECT_EQ(pieces("{{ t }}{{ m.content | length }}"), "T4 ");
}

// A value may be assigned something it alone keeps alive (a request's "messages" replacing the
// request). Under AddressSanitizer a member-wise assignment reads freed memory here.
TEST(Jinja, AssigningAValueFromInsideItselfIsSafe) {
  Value request = parse_json(R"({"tools": [1], "messages": [{"role": "user", "content": "hi"}]})");
  const Value* inner = request.as_dict().find("messages");
  ASSERT_NE(inner, nullptr);
  request = *inner;
  ASSERT_TRUE(request.is_list());
  ASSERT_EQ(request.as_list().size(), 1u);
  EXPECT_EQ(request.as_list()[0].as_dict().find("content")->as_string(), "hi");

  Value list = parse_json(R"([[7, 8]])");
  list = list.as_list()[0];
  ASSERT_TRUE(list.is_list());
  EXPECT_EQ(list.as_list()[1].as_int(), 8);
}

TEST(Jinja, JsonRoundTripsKeyOrderAndRejectsMalformedInput) {
  const std::string text = R"({"z": 1, "a": [true, null, -2.5, "\u00e9\n"], "m": {}})";
  EXPECT_EQ(to_json(parse_json(text)), R"({"z": 1, "a": [true, null, -2.5, "é\n"], "m": {}})");
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "\"\\x\"", "01x", "[1] 2", "\"\\ud800\""}) {
    EXPECT_THROW(parse_json(bad), Error) << bad;
  }
  // Nesting deep enough to exhaust a naive parser's stack is refused instead.
  EXPECT_THROW(parse_json(std::string(100000, '[')), Error);
}

}  // namespace
}  // namespace hearth::text::jinja
