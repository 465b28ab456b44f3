// link: cudart-static
// The same program as sim_runtime_ext_shared.c, linked with the static simulated runtime; see
// sim_runtime_ext.h.
#include "sim_runtime_ext.h"
