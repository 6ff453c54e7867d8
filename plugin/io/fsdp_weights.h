/* fsdp_weights.h: checks a Darknet weights file against the network it was
 * loaded into.  Darknet reads layer after layer and stops quietly at the end
 * of the file, which is how a trunk-only file (darknet partial) seeds a new
 * head, and ignores what is left over (a head skipped with dontload=1).  A
 * file that ends inside a layer, though, is truncated or was written for
 * another cfg: Darknet would train from half-loaded weights. */
#ifndef FSDP_WEIGHTS_H
#define FSDP_WEIGHTS_H

#include "darknet.h"
#include "fsdp.h"

fsdp_status fsdp_weights_check(const network *net, const char *file);

#endif
