#include "gradsync/trainer/half.hpp"

namespace gradsync::trainer {

void round_to_half(Tensor& t) { backend::for_each(t.size(), kernels::RoundToHalf{t.data(), t.data()}); }

}  // namespace gradsync::trainer
