// link: cudart-shared
// The runtime's later entry points (per-thread stream variants, arrays, host registration,
// graphs) against the shared simulated runtime; see sim_runtime_ext.h.
#include "sim_runtime_ext.h"
