// The regexes of every tokenizer.ggml.pre value llama.cpp's converter writes for byte-level BPE
// vocabularies, grouped into families that share them. Each regex is the model's own (from its
// tokenizer.json) in the form llama.cpp runs it: case-insensitive contractions spelled out, and
// character classes matching what llama.cpp's matcher sees (see the notes at each family).
#include "text/pretokenize_families.h"

#include <array>

namespace hearth::text {
namespace {

using std::string_view;

// The English contractions, matched as `'[sS]` rather than `(?i:'s)`: a case-insensitive `s`
// would also take U+017F (long s), and `k`-like folds likewise, which the models' matchers do not.
#define HEARTH_CONTRACTIONS "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"

// GPT-2's encoder.py pattern. The final `\s+` only names whitespace that the lookahead alternative
// leaves behind; such text would become a piece of its own anyway.
#define HEARTH_GPT2 \
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

// Llama 3's shape: a letter run may take one leading non-letter, punctuation keeps the newlines
// after it; NUM is the digit rule that tells the variants apart.
#define HEARTH_LLAMA3_LIKE(NUM)                                                      \
  "(?:" HEARTH_CONTRACTIONS ")|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" NUM                  \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

// Letters by case as llama.cpp matches them: `(?=\p{L})[^a-z]` (a letter that is not an ASCII
// lower-case one) stands for the upper/title/modifier/other-letter class, so every non-ASCII
// letter counts as both cases. MARK adds \p{M} to what counts as a letter.
#define HEARTH_CASED_WORDS(MARK, SUFFIX)                                                         \
  "[^\\r\\n\\p{L}\\p{N}]?(?:(?=[\\p{L}" MARK "])[^a-z])*(?:(?=[\\p{L}" MARK "])[^A-Z])+" SUFFIX \
  "|[^\\r\\n\\p{L}\\p{N}]?(?:(?=[\\p{L}" MARK "])[^a-z])+(?:(?=[\\p{L}" MARK "])[^A-Z])*" SUFFIX

// DeepSeek V3's word rule: an ASCII punctuation mark may lead an ASCII word; letters take marks.
#define HEARTH_DEEPSEEK3_WORDS                                                   \
  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"                         \
  "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"

// CJK ideographs and everything from U+0800 up to them, and Hangul. llama.cpp turns non-ASCII
// whitespace into U+000B before matching, so the whitespace inside U+0800..U+4E00 (U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) never matches here and is cut out.
#define HEARTH_DEEPSEEK_CJK                                                                 \
  "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}"           \
  "\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{4E00}"            \
  "\\x{AC00}-\\x{D7FF}]+"

#define HEARTH_KANA_HAN "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"

// BLOOM's split: everything up to whitespace or a sentence mark (Latin, CJK, Devanagari, Arabic).
// The parentheses and bar are inside the class, as in the original.
#define HEARTH_BLOOM \
  " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"

constexpr std::array<string_view, 1> kGpt2 = {HEARTH_GPT2};

// llama.cpp's own choice for files without a name: punctuation runs, then GPT-2, then digits.
constexpr std::array<string_view, 4> kDefault = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", HEARTH_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"};

constexpr std::array<string_view, 3> kFalcon = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", HEARTH_GPT2,
                                               "[0-9][0-9][0-9]"};

// StarCoder and the code models after it: every digit alone, then GPT-2.
constexpr std::array<string_view, 2> kStarcoder = {"\\p{N}", HEARTH_GPT2};

constexpr std::array<string_view, 1> kLlama3 = {HEARTH_LLAMA3_LIKE("\\p{N}{1,3}")};
constexpr std::array<string_view, 1> kQwen2 = {HEARTH_LLAMA3_LIKE("\\p{N}")};

// Jais 2: Llama 3's rule with whitespace runs cut into power-of-two lengths.
constexpr std::array<string_view, 1> kJais2 = {
    "(?:" HEARTH_CONTRACTIONS ")|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)"
    "|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)"
    "|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"};

// Qwen 3.5: Qwen 2's rule with combining marks kept in words.
constexpr std::array<string_view, 1> kQwen35 = {
    "(?:" HEARTH_CONTRACTIONS ")|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};

// DeepSeek LLM: newlines alone, cased-script letter runs (an explicit list of ranges, not \p{L}),
// ASCII/full-width punctuation runs, trailing whitespace, CJK runs, digit runs. The punctuation
// class starts at U+3001: its U+3000 is whitespace, which llama.cpp never lets this class see.
constexpr std::array<string_view, 6> kDeepseekLlm = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3001}-\\x{3002}]+",
    "\\s+$",
    HEARTH_DEEPSEEK_CJK,
    "\\p{N}+"};

constexpr std::array<string_view, 5> kDeepseekCoder = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", HEARTH_DEEPSEEK_CJK, "\\p{N}"};

constexpr std::array<string_view, 3> kDeepseekV3 = {
    "\\p{N}{1,3}", HEARTH_KANA_HAN,
    HEARTH_DEEPSEEK3_WORDS "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};

constexpr std::array<string_view, 4> kSpark25 = {
    "\\p{N}{1,3}", HEARTH_KANA_HAN,
    HEARTH_DEEPSEEK3_WORDS "| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+", "\\p{N}"};

constexpr std::array<string_view, 1> kBloom = {HEARTH_BLOOM};
constexpr std::array<string_view, 2> kViking = {HEARTH_BLOOM, "\\p{N}"};

// Mistral's Tekken: words split by case, each digit alone, '/' kept after punctuation.
constexpr std::array<string_view, 1> kTekken = {
    HEARTH_CASED_WORDS("", "") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+"
                               "|\\s+(?!\\S)|\\s+"};

// GPT-4o (o200k): Tekken's cased words with contractions attached, digits in threes.
#define HEARTH_GPT4O_TAIL \
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
constexpr std::array<string_view, 1> kGpt4o = {
    HEARTH_CASED_WORDS("", "(?:" HEARTH_CONTRACTIONS ")?") HEARTH_GPT4O_TAIL};
constexpr std::array<string_view, 1> kGraniteEmbedMulti = {
    HEARTH_CASED_WORDS("\\p{M}", "(?:" HEARTH_CONTRACTIONS ")?") HEARTH_GPT4O_TAIL};

// Chameleon: its sentinel and image-code tokens, tab/newline and space pairs, digits and
// punctuation alone, then GPT-2.
constexpr std::array<string_view, 6> kChameleon = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", HEARTH_GPT2};

// SuperBPE: digit runs cut into threes from the right (empty matches mark the cuts).
constexpr std::array<string_view, 2> kSuperBpe = {"\\p{N}+", "(?=(?:[0-9]{3})+(?![0-9]))"};

constexpr std::array<string_view, 1> kBailing = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};

constexpr std::array<string_view, 1> kSeedCoder = {
    "(?:" HEARTH_CONTRACTIONS ")|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}"
    "| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};

// Qwen 2's rule without the contractions, so that Turkish suffixes after ' stay with the word.
constexpr std::array<string_view, 1> kUfakzeka = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)|\\s+"};

constexpr std::array<string_view, 2> kLaguna = {"[^\\n]+|[\\n]+", HEARTH_LLAMA3_LIKE("\\p{N}")};

constexpr std::array<string_view, 1> kExaoneMoe = {
    "(?:" HEARTH_CONTRACTIONS ")|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};

constexpr std::array<string_view, 2> kMinicpm5 = {"\\p{N}{1,3}",
                                                 HEARTH_LLAMA3_LIKE("\\p{N}+")};

struct Alias {
  string_view name;  // a tokenizer.ggml.pre value, as llama.cpp's converter writes it
  PreTokenizerFamily family;
};

constexpr PreTokenizerFamily plain(std::span<const string_view> regexes) {
  return {regexes, false, false};
}
// Vocabularies with tokens that cannot be reached through their merges, whose BOS is on by default.
constexpr PreTokenizerFamily whole_words_bos(std::span<const string_view> regexes) {
  return {regexes, true, true};
}

// clang-format off
constexpr Alias kAliases[] = {
    {"default", plain(kDefault)},
    {"gpt-2", plain(kGpt2)}, {"phi-2", plain(kGpt2)}, {"mpt", plain(kGpt2)},
    {"olmo", plain(kGpt2)}, {"jais", plain(kGpt2)}, {"trillion", plain(kGpt2)},
    {"granite-docling", plain(kGpt2)}, {"exaone4", plain(kGpt2)}, {"gigachat", plain(kGpt2)},
    {"jina-es", plain(kGpt2)}, {"jina-de", plain(kGpt2)}, {"jina-v2-es", plain(kGpt2)},
    {"jina-v2-de", plain(kGpt2)}, {"a.x-4.0", plain(kGpt2)}, {"mellum", plain(kGpt2)},
    {"modern-bert", plain(kGpt2)},
    {"llama3", whole_words_bos(kLlama3)}, {"llama-v3", whole_words_bos(kLlama3)},
    {"llama-bpe", whole_words_bos(kLlama3)}, {"falcon3", whole_words_bos(kLlama3)},
    {"falcon-h1", whole_words_bos(kLlama3)}, {"pixtral", whole_words_bos(kLlama3)},
    {"midm-2.0", whole_words_bos(kLlama3)}, {"lfm2", whole_words_bos(kLlama3)},
    {"jina-v5-nano", whole_words_bos(kLlama3)},
    {"dbrx", plain(kLlama3)}, {"smaug-bpe", plain(kLlama3)}, {"glm4", plain(kLlama3)},
    {"chatglm-bpe", plain(kLlama3)},
    {"jais-2", plain(kJais2)},
    {"qwen2", plain(kQwen2)}, {"deepseek-r1-qwen", plain(kQwen2)}, {"kormo", plain(kQwen2)},
    {"f2llmv2", plain(kQwen2)}, {"stablelm2", plain(kQwen2)}, {"megrez", plain(kQwen2)},
    {"hunyuan", plain(kQwen2)}, {"solar-open", plain(kQwen2)}, {"grok-2", plain(kQwen2)},
    {"qwen35", plain(kQwen35)},
    {"deepseek-llm", plain(kDeepseekLlm)},
    {"deepseek-coder", plain(kDeepseekCoder)},
    {"deepseek-v3", plain(kDeepseekV3)}, {"hunyuan-dense", plain(kDeepseekV3)},
    {"hy_v4", plain(kDeepseekV3)}, {"joyai-llm", plain(kDeepseekV3)},
    {"spark2_5", plain(kSpark25)},
    {"falcon", plain(kFalcon)},
    {"starcoder", plain(kStarcoder)}, {"refact", plain(kStarcoder)},
    {"command-r", plain(kStarcoder)}, {"smollm", plain(kStarcoder)},
    {"codeshell", plain(kStarcoder)}, {"exaone", plain(kStarcoder)},
    {"minerva-7b", plain(kStarcoder)}, {"mellum2", plain(kStarcoder)},
    {"poro-chat", plain(kBloom)}, {"bloom", plain(kBloom)}, {"gpt3-finnish", plain(kBloom)},
    {"viking", plain(kViking)},
    {"tekken", whole_words_bos(kTekken)},
    {"chameleon", {kChameleon, false, true}},
    {"gpt-4o", plain(kGpt4o)}, {"llama4", plain(kGpt4o)}, {"kanana2", plain(kGpt4o)},
    {"talkie", plain(kGpt4o)}, {"minimax-m2", plain(kGpt4o)},
    {"granite-embed-multi-97m", {kGraniteEmbedMulti, true, false}},
    {"superbpe", plain(kSuperBpe)},
    {"bailingmoe", plain(kBailing)}, {"bailingmoe2", plain(kBailing)},
    {"llada-moe", plain(kBailing)},
    {"seed-coder", plain(kSeedCoder)},
    {"ufakzeka", plain(kUfakzeka)},
    {"laguna", plain(kLaguna)},
    {"exaone-moe", plain(kExaoneMoe)},
    {"minicpm5", {kMinicpm5, true, false}},
};
// clang-format on

}  // namespace

const PreTokenizerFamily* find_pre_tokenizer_family(std::string_view name) {
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return &alias.family;
  }
  return nullptr;
}

std::string pre_tokenizer_family_names() {
  std::string names;
  for (const Alias& alias : kAliases) {
    if (!names.empty()) names += ", ";
    names += alias.name;
  }
  return names;
}

}  // namespace hearth::text
