/* nosys.c: what the provider does not do.
 *
 * libfabric's calls are inline functions that jump through the object's
 * ops tables without checking them (fi_mr_reg is domain->mr->reg(...)), so
 * a table left NULL, or a NULL member, crashes the application instead of
 * failing the call. Every table of every object made here is therefore
 * complete, and what is not implemented says so: -FI_ENOSYS, the code that
 * the inlines return themselves where they do check (FI_CHECK_OP) and that
 * libfabric's own providers return (its internal fi_no_* helpers, which a
 * DL provider cannot link to). nosys.h lists them. */
#include "prov.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define MRP_NOSYS_DECL(type, name, params)                                                                     \
	MRP_HIDDEN type name params { return -FI_ENOSYS; }
#include "nosys.h"
