// link: cudart-static
// shim_runtime.c, linked with the static runtime as nvcc does by default: the runtime's calls
// are internal to the executable, so only its driver calls can be seen.
#include "shim_runtime.c"
