/* unicode.h: the three character classes GPT-2's pre-tokenizer needs.
 *
 * Membership tests for letters, numbers and whitespace, answered from range tables that
 * tools/gen_unicode.py generates into unicode.c (Unicode 14.0.0). No UTF-8 here: callers
 * decode code points first (tokenizer.c does).
 */
#ifndef UNICODE_H
#define UNICODE_H

#include <stdint.h>   /* uint32_t */

/* 1 if cp is a letter, \p{L} (general category Lu, Ll, Lt, Lm or Lo), else 0.
 * Any uint32_t is accepted; values above U+10FFFF are simply not letters. */
int unicode_is_letter(uint32_t cp);

/* 1 if cp is a number, \p{N} (general category Nd, Nl or No), else 0. Any uint32_t. */
int unicode_is_number(uint32_t cp);

/* 1 if cp is whitespace as JavaScript's \s defines it (ECMAScript WhiteSpace and
 * LineTerminator: U+0009..000D, U+0020, U+00A0, U+1680, U+2000..200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000, U+FEFF), else 0. Not U+0085, not U+001C..001F. Any uint32_t. */
int unicode_is_space(uint32_t cp);

#endif /* UNICODE_H */
