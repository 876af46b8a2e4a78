#pragma once
/// gradsync: gradient synchronization for data-parallel training. Include this one header.
///
/// \code
///   #include <gradsync/gradsync.hpp>
///   namespace gs = gradsync;
///   gs::transport::InProcessGroup group(4);                 // or transport::Mpi (link gradsync::mpi)
///   gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::ForwardOrder,
///                    gs::codec::Identity, gs::collective::Ring> sync{group.rank(r), layout};
///   // or, chosen from strings at run time:
///   gs::AnySynchronizer any{group.rank(r), layout, {.slicing = "fixed:40000", .collective = "ps"}};
/// \endcode
/// Gradients in GPU memory: gradsync/cuda/on_device.cuh (from a .cu file) adds cuda::OnDevice<Codec>.
#include "any_synchronizer.hpp"
#include "codec/on_device.hpp"
#include "synchronizer.hpp"
#include "transport/in_process.hpp"
#include "transport/throttled.hpp"
#if defined(GRADSYNC_WITH_MPI)  // set by the gradsync::mpi CMake target
#include "transport/mpi.hpp"
#endif
