#include <cstddef>
#include <cstdint>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

// Placeholder until the Highway kernel lands: always defer to the scalar path.
bool quantize_f32_fast(const Format&, const float*, float*, size_t, const QuantOptions&,
                       QuantStats*, uint64_t) {
  return false;
}

}  // namespace precsim
