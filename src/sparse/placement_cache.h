// The solved placement, cached beside the model (DESIGN.md section 4) so that a second start does
// not solve again: PowerInfer's `<model>.generated.gpuidx`, but keyed by everything the answer
// depends on. PowerInfer reuses its file whenever the free VRAM is at least what it was solved for,
// so a new context size, a recalibrated model or a solver fix silently keep a stale split; here any
// change to the request gives another key and the file is solved again.
// The file is a plain GGUF (docs/formats.md, "Placement cache").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sparse/placement.h"

namespace hearth::sparse {

// A stable 64-bit FNV-1a hash of the model identity (whatever names the model's bytes for the
// caller, e.g. its path, size and modification time, or a hash of its contents), the solver
// version, the strategy, the budget and every cost and frequency of the request, each encoded
// little-endian with its length, so the key is the same on every platform and build.
uint64_t placement_key(const std::string& model_identity, const PlacementRequest& request);
// The same with another solver version (tests: a version bump must change the key).
uint64_t placement_key(const std::string& model_identity, const PlacementRequest& request,
                       uint32_t solver_version);

// model_path + ".hearth-placement.gguf"
std::string placement_cache_path(const std::string& model_path);

// The cached placement, or nullopt with the reason in *why_not (when not null) if the file is
// missing, unreadable, not a placement cache, corrupt (every length, id and count is checked), or
// was solved for another key or solver version. Never throws.
std::optional<Placement> load_placement_cache(const std::string& path, uint64_t key,
                                              std::string* why_not);

// Writes the placement under `key` through a temporary file renamed over `path`, so a reader never
// sees half a file. False with the reason in *error (when not null) when it cannot be written
// (e.g. the model's directory is read-only: the caller warns and goes on) or when the placement
// is not one solve_placement could have made. Never throws.
bool save_placement_cache(const std::string& path, uint64_t key, const Placement& placement,
                          std::string* error);

}  // namespace hearth::sparse
