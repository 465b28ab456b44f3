// link: cudart-static
// The runtime API linked with the static simulated runtime, as nvcc does by default: the
// runtime's code is inside the executable and reaches libcuda.so.1 only through dlopen and
// cuGetProcAddress. Same program as sim_runtime_shared.c; see sim_runtime.h.
#include "sim_runtime.h"
