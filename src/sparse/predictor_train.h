// Native trainer for the activation predictors of one FFN layer (DESIGN.md section 1,
// calibration). A predictor guesses which of the n_ff neurons fire for a token:
//
//   score = fc2 · relu(fc1 · p)      fc1 [rank, n_embd], fc2 [n_ff, rank], no biases
//
// and neuron i is predicted active iff score_i >= threshold. Training minimises a binary
// cross-entropy on sigmoid(score) in which fired neurons weigh more (a miss costs a wrong output,
// a false alarm only bandwidth), with Adam on mini-batches. The threshold is then chosen on a
// held-out split so that the layer reaches the target recall, and with several candidate widths
// the one that reads the fewest bytes per token wins.
//
// Results are bit-for-bit deterministic for a given seed and inputs, whatever n_threads is: every
// output element of every matrix product is summed by one thread in a fixed order.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace hearth::sparse {

// Samples of one layer: predictor inputs and which neurons fired.
struct PredictorSamples {
  int64_t n_embd = 0, n_ff = 0;
  std::vector<float> x;                                // [n, n_embd]
  std::vector<uint8_t> fired;                          // [n, n_ff], 0 or 1
  int64_t size() const;                                // n
  void add(const float* p, const uint8_t* fired_row);  // appends one sample
};

struct PredictorTrainOptions {
  std::vector<int64_t> ranks;   // candidate hidden widths; one entry = fixed width
  double target_recall = 0.95;  // per layer, on the validation split
  double bytes_per_neuron = 0;  // FFN weight bytes one active neuron costs (up+gate+down rows)
  double bytes_per_rank = 0;  // predictor bytes per unit of width ((n_embd + n_ff) * element size)
  int epochs = 30;
  int64_t batch = 256;
  float learning_rate = 1e-2f;  // peak; decays along a cosine to 5% of it by the last step
  // Weight of fired neurons in the loss; 0 = auto: sqrt(negatives / positives) of the training
  // split, clipped to [1, 10].
  float pos_weight = 0;
  double validation = 0.15;  // share of the samples held out (the last ones, never trained on) to
                             // pick the threshold; 0 picks it on the training samples
  uint64_t seed = 1;
  int n_threads = 1;
};

struct PredictorQuality {
  double recall = 0;              // fired neurons predicted / fired neurons (1 when none fired)
  double precision = 0;           // fired neurons predicted / predicted (1 when none predicted)
  double predicted_sparsity = 0;  // share of (token, neuron) pairs predicted inactive
  double true_sparsity = 0;       // share of (token, neuron) pairs that did not fire
};

// One width tried by train_predictor, for reports and for checking the choice.
struct PredictorCandidate {
  int64_t rank = 0;
  float threshold = 0;
  PredictorQuality validation;
  // rank * bytes_per_rank + (1 - predicted_sparsity) * n_ff * bytes_per_neuron
  double bytes_per_token = 0;
  float final_loss = 0;  // mean training loss of the last epoch
};

struct TrainedPredictor {
  int64_t rank = 0;
  std::vector<float> fc1;  // [rank, n_embd]
  std::vector<float> fc2;  // [n_ff, rank]
  float threshold = 0;     // score threshold chosen on the validation split to reach target_recall
  PredictorQuality validation;  // measured on the validation split with that threshold
  std::vector<float> loss;      // mean training loss per epoch (of the chosen rank)
  float pos_weight = 0;         // the weight of positives actually used (auto resolved)
  std::vector<PredictorCandidate> candidates;  // every width tried, smallest first
};

// Trains one predictor per candidate width (smallest first) and returns the one with the fewest
// estimated bytes per token among those reaching target_recall on validation (ties and
// bytes_per_* = 0 -> the smaller width). progress(rank, epoch, epochs, loss) is called after every
// epoch of every candidate, epoch counting from 1 (may be empty). Throws hearth::Error on bad
// input, or if training diverges.
TrainedPredictor train_predictor(
    const PredictorSamples& samples, const PredictorTrainOptions& o,
    const std::function<void(int64_t rank, int epoch, int epochs, float loss)>& progress = {});

// The quality of a predictor, with its threshold, on other samples (held-out tokens).
PredictorQuality evaluate_predictor(const TrainedPredictor& p, const PredictorSamples& samples);

// score[n_ff] = fc2 · relu(fc1 · x)  (the same function the runtime computes). x: [n_embd].
void predictor_scores(const TrainedPredictor& p, const float* x, float* score);

}  // namespace hearth::sparse
