// Text through a dense session window by window: what calibration and the importance matrix
// (hearth imatrix) both do to see a model's activations on text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hearth/model.h"
#include "hearth/session.h"

namespace hearth::calib {

// The tokens of `text` (no BOS); throws hearth::Error when it is not UTF-8, naming it as `what`.
std::vector<int32_t> tokenize_text(const Model& m, const std::string& text, const char* what);

// What is done with one window's input (BOS, when the model adds one, then its tokens) in a
// session whose context is empty: by default session.eval(input).
using WindowStep = std::function<void(Session& session, std::span<const int32_t> input)>;

// Runs `tokens` through a session made with `so` (its n_ctx and n_batch set to window + 1) in
// windows of `window` tokens, each from an empty context after BOS when the model adds one. The
// observers in `so` see every window. Progress lines ("LABEL: i/n tokens, ...") go to `log`
// about every two seconds and at the end. Returns the session's statistics over all windows.
SparseStats run_windows(const std::shared_ptr<const Model>& model, std::span<const int32_t> tokens,
                        SessionOptions so, int64_t window,
                        const std::function<void(const std::string&)>& log,
                        const std::string& label, const WindowStep& step = {});

}  // namespace hearth::calib
