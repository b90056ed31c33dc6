// The chat page answered at GET /: src/server/chat_page.html, compiled in as a string at build
// time by cmake/embed_text.cmake (the generated chat_page_html.cc lives in the build folder).
#pragma once

#include <string_view>

namespace hearth::embedded {

std::string_view chat_page_html();

}  // namespace hearth::embedded
