// The one tokenizer (ARCHITECTURE.md, "Tokens"): maximal runs of ASCII letters, digits and bytes
// >= 0x80; ASCII letters lower-cased; no stemming, no stop words. Corpus and queries share it.
#pragma once

#include <string>
#include <string_view>

namespace gpusearch {

inline bool is_token_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

// Calls on_token(std::string_view) for every token of text, in order. The view is valid only
// during the call (it points into a reused buffer).
template <typename OnToken>
void for_each_token(std::string_view text, OnToken&& on_token) {
  std::string token;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && !is_token_byte(static_cast<unsigned char>(text[i]))) ++i;
    if (i == n) break;
    token.clear();
    while (i < n && is_token_byte(static_cast<unsigned char>(text[i]))) {
      char c = text[i++];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      token.push_back(c);
    }
    on_token(std::string_view(token));
  }
}

}  // namespace gpusearch
