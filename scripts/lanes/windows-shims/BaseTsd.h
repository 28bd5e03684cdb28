// Gloo's headers include <BaseTsd.h> as Windows spells it; MinGW-w64 ships it as basetsd.h, which a
// case-sensitive Linux file system tells apart. Only the lane's cross-compile needs this.
#include <basetsd.h>
