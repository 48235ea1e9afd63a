#include "cli/terminal_input.h"

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace hinge::cli {

bool stdin_is_terminal() { return ::isatty(STDIN_FILENO) == 1; }

std::optional<std::string> read_line() {
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::optional<std::string> read_secret(const char* prompt) {
  termios saved{};
  const bool tty = stdin_is_terminal() && ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (tty) {  // echo off before the prompt shows, so nothing typed after it is ever echoed
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL;  // the Enter still moves to the next line
    ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::fputs(prompt, stderr);
  std::fflush(stderr);
  std::optional<std::string> line = read_line();
  if (tty) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  if (!tty) std::fputc('\n', stderr);
  return line;
}

}  // namespace hinge::cli
