// link: cudart-static
// shim_runtime_tags.c, linked with the static runtime: the same driver records, none tagged.
#include "shim_runtime_tags.c"
