"""The driver API in one namespace: the calls anycuda implements, with CUDA's semantics.

Each cuXxx function mirrors one C entry point; pointer arguments arrive as ints, handles are
ints from one table, and failures raise CudaError (the shim returns its code). The calls live
by concept, each module built on the ones before it: handles (the handle table, contexts as
the calling thread sees them, sticky faults), contexts (cuInit, devices, contexts, peers,
limits, error names), streams (streams, events, capture, graphs), memory, modules
(modules, libraries, kernels, the linker) and launches (launches, occupancy). Callers use this
module (`api.cuMemAlloc`) and need not know where a call lives.
"""
from __future__ import annotations

from .handles import (Context, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, _current, EventHandle, _faults_are_sticky,
                      flush_device_output, Function, _get, _handles, _lock, Module, _new_handle, _require_context,
                      STICKY, StreamHandle)
from .contexts import (context_id, context_teardown_hooks, cuCtxCreate, cuCtxDestroy, cuCtxDisablePeerAccess,
                       cuCtxEnablePeerAccess, cuCtxGetCurrent, cuCtxGetDevice, cuCtxGetLimit, cuCtxPopCurrent,
                       cuCtxPushCurrent, cuCtxSetCurrent, cuCtxSetLimit, cuCtxSynchronize, cuDeviceCanAccessPeer,
                       cuDeviceComputeCapability, cuDeviceGet, cuDeviceGetAttribute, cuDeviceGetByPCIBusId,
                       cuDeviceGetCount, cuDeviceGetName, cuDeviceGetP2PAttribute, cuDeviceGetPCIBusId,
                       cuDeviceGetUuid, cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxRelease,
                       cuDevicePrimaryCtxReset, cuDevicePrimaryCtxRetain, cuDeviceTotalMem, cuDriverGetVersion,
                       cuInit, DRIVER_VERSION, error_name, error_string)
from .streams import (call_with_per_thread_default, capture_id, cuEventCreate, cuEventDestroy, cuEventElapsedTime,
                      cuEventQuery, cuEventRecord, cuEventSynchronize, cuGraphCreate, cuGraphDestroy,
                      cuGraphExecDestroy, cuGraphInstantiate, cuGraphLaunch, cuGraphUpload, cuLaunchHostFunc,
                      cuStreamAddCallback, cuStreamBeginCapture, cuStreamCreate, cuStreamCreateWithPriority,
                      cuStreamDestroy, cuStreamEndCapture, cuStreamGetCtx, cuStreamIsCapturing, cuStreamQuery,
                      cuStreamSynchronize, cuStreamWaitEvent, Graph, graph_add_host_node, graph_add_node, GraphExec,
                      GraphNode, stream_flags, stream_priority, submit, wait_for_stream)
from .memory import (_allocate, CU_DEVICE_CPU, cuDeviceGetDefaultMemPool, cuMemAlloc, cuMemAllocAsync,
                     cuMemAllocFromPoolAsync, cuMemAllocHost, cuMemAllocManaged, cuMemAllocPitch, cuMemcpy,
                     cuMemcpy2D, cuMemcpy3D, cuMemcpy3DPeer, cuMemcpyAsync, cuMemcpyPeer, cuMemcpyPeerAsync,
                     cuMemFree, cuMemFreeAsync, cuMemFreeHost, cuMemGetAddressRange, cuMemGetInfo, cuMemHostRegister,
                     cuMemHostUnregister, cuMemPoolGetAttribute, cuMemPoolSetAttribute, cuMemsetAsync, cuMemsetD2D,
                     cuMemsetD32, cuMemsetD8, cuPointerGetAttribute, LOCATION_DEVICE, LOCATION_HOST,
                     LOCATION_HOST_NUMA, LOCATION_HOST_NUMA_CURRENT, location_of_device, managed_hint, MEM_ADVICE,
                     memcpy_3d_work, MemPool, memset_2d_work, pointer_attribute_or_default)
from .modules import (cuFuncSetAttribute, cuKernelGetFunction, cuKernelGetLibrary, cuLibraryGetGlobal,
                      cuLibraryGetKernel, cuLibraryGetManaged, cuLibraryGetModule, cuLibraryLoadData, cuLibraryUnload,
                      cuLinkAddData, cuLinkAddFile, cuLinkComplete, cuLinkCreate, cuLinkDestroy, cuModuleGetFunction,
                      cuModuleGetGlobal, cuModuleGetLoadingMode, cuModuleLoadData, cuModuleUnload, function_name,
                      image_at, Kernel, Library, LinkState, ModuleImage, ptx_from_image)
from .launches import (check_cooperative_grid, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                       CU_LAUNCH_ATTRIBUTE_IGNORE, CU_OCCUPANCY_DEFAULT, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE,
                       cuFuncGetAttribute, cuLaunchCooperativeKernel, cuLaunchKernel, cuLaunchKernelEx,
                       cuOccupancyAvailableDynamicSMemPerBlock, cuOccupancyMaxActiveBlocksPerMultiprocessor,
                       cuOccupancyMaxPotentialBlockSize, graph_kernel_work, kernel_param_layout)
