// link: cudart-shared
// The runtime API against the shared simulated runtime (libcudart.so.12); see sim_runtime.h.
#include "sim_runtime.h"
