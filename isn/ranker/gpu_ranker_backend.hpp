// The GPU evaluator behind RankerBackend: gpu/ranker_engine.hpp adapted to the ISN's interface
// (built only with CUDA; isn/ranker/ranker_backend.cpp picks it).
#pragma once

#include <memory>

#include "isn/ranker/ranker_backend.hpp"

namespace gpusearch::ranker {

bool gpu_ranker_device_present();
// Throws when there is no CUDA device (or not that one).
std::unique_ptr<RankerBackend> make_gpu_ranker_backend(int device = -1);

}  // namespace gpusearch::ranker
