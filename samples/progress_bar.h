#pragma once
// Training progress for samples: on a terminal one line redrawn in place (a bar, step, loss, tokens/s,
// ETA); when stdout is a file or a pipe (CI logs), a plain line every `every` steps and none redrawn.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace samples {

class ProgressBar {
 public:
  ProgressBar(int64_t total_steps, int64_t every = 10)
      : total_(total_steps), every_(every), tty_(isatty(fileno(stdout)) != 0), start_(Clock::now()) {}

  // After step `step` (1-based) with `tokens` processed since the bar started.
  void update(int64_t step, double loss, int64_t tokens) {
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    double tok_s = secs > 0 ? double(tokens) / secs : 0;
    double eta = step > 0 ? secs / double(step) * double(total_ - step) : 0;
    if (tty_) {
      constexpr int kWidth = 30;
      int filled = int(kWidth * step / std::max<int64_t>(total_, 1));
      std::string bar = std::string(size_t(filled), '=') + (filled < kWidth ? ">" : "") +
                        std::string(size_t(std::max(0, kWidth - filled - 1)), ' ');
      std::printf("\r[%s] step %lld/%lld  loss %.4f  %.0f tok/s  ETA %s   ", bar.c_str(), (long long)step,
                  (long long)total_, loss, tok_s, clock_text(eta).c_str());
      std::fflush(stdout);
    } else if (step % every_ == 0 || step == total_) {
      std::printf("step %lld/%lld  loss %.4f  %.0f tok/s  ETA %s\n", (long long)step, (long long)total_, loss, tok_s,
                  clock_text(eta).c_str());
    }
  }
  // A line of its own (an evaluation, a checkpoint) between redraws of the bar.
  void message(const std::string& line) {
    std::printf(tty_ ? "\r%-100s\n" : "%s\n", line.c_str());
    std::fflush(stdout);
  }
  void finish() {
    if (tty_) std::printf("\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  static std::string clock_text(double secs) {
    long s = long(secs + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    return buf;
  }
  int64_t total_, every_;
  bool tty_;
  Clock::time_point start_;
};

}  // namespace samples
