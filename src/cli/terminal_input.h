// Reading lines from the terminal for `hinge chat`: the conversation's lines, and secrets
// (passphrases) with echo off when stdin is a terminal. When stdin is not a terminal (a pipe,
// a script), a secret is simply the next line.
#pragma once

#include <optional>
#include <string>

namespace hinge::cli {

bool stdin_is_terminal();
// The next line of stdin without its newline; nullopt at end of input.
std::optional<std::string> read_line();
// Shows `prompt` on stderr and reads one line with echo off (when stdin is a terminal);
// nullopt at end of input. The caller zeroes the result when done (sodium_memzero).
std::optional<std::string> read_secret(const char* prompt);

}  // namespace hinge::cli
