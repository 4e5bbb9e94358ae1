// Umbrella header of the hedgedb core library.
#pragma once

#include "hedgedb/arrays.h"
#include "hedgedb/db.h"
#include "hedgedb/export.h"
#include "hedgedb/fuse.h"
#include "hedgedb/match_parameters.h"
#include "hedgedb/npy.h"
#include "hedgedb/options.h"
#include "hedgedb/score.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"
