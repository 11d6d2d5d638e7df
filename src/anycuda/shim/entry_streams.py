"""The C entry points of streams, events and graphs (stream
capture and explicit nodes): marshalling only (the semantics are in
anycuda.driver.api). Called from entry.define() with the marshalling they share
(shim/marshal.py). `define` is long because it is a list: one closure of a few lines per C
entry point."""
from __future__ import annotations

import threading

from ..driver import api
from ..runtime.errors import CudaError, CUresult


def define(ffi, entry, ptr, handle, common):
    @entry
    def cuStreamCreate(out, flags):
        out[0] = handle(api.cuStreamCreate(flags))

    @entry
    def cuStreamDestroy_v2(stream):
        api.cuStreamDestroy(ptr(stream))

    @entry
    def cuStreamSynchronize(stream):
        api.cuStreamSynchronize(ptr(stream))

    @entry
    def cuEventCreate(out, flags):
        out[0] = handle(api.cuEventCreate(flags))

    @entry
    def cuEventRecord(event, stream):
        api.cuEventRecord(ptr(event), ptr(stream))

    @entry
    def cuEventQuery(event):
        api.cuEventQuery(ptr(event))

    @entry
    def cuEventSynchronize(event):
        api.cuEventSynchronize(ptr(event))

    @entry
    def cuEventElapsedTime_v2(out, start, end):
        out[0] = api.cuEventElapsedTime(ptr(start), ptr(end))

    @entry
    def cuEventDestroy_v2(event):
        api.cuEventDestroy(ptr(event))

    @entry
    def cuStreamWaitEvent(stream, event, flags):
        api.cuStreamWaitEvent(ptr(stream), ptr(event))

    @entry
    def cuStreamQuery(stream):
        api.cuStreamQuery(ptr(stream))

    @entry
    def cuLaunchHostFunc(stream, fn, user):
        api.cuLaunchHostFunc(ptr(stream), ptr(fn), ptr(user))

    def capture_info(stream, status, id_out, graph_out, deps_out, edges_out, count_out):
        status[0] = api.cuStreamIsCapturing(ptr(stream))
        if id_out != ffi.NULL:
            id_out[0] = api.capture_id(ptr(stream))
        if graph_out != ffi.NULL:
            graph_out[0] = ffi.NULL          # the graph under capture is not exposed yet
        for out in (deps_out, edges_out):
            if out != ffi.NULL:
                out[0] = ffi.NULL
        if count_out != ffi.NULL:
            count_out[0] = 0

    @entry
    def cuStreamGetCaptureInfo_v2(stream, status, id_out, graph_out, deps_out, count_out):
        capture_info(stream, status, id_out, graph_out, deps_out, ffi.NULL, count_out)

    @entry
    def cuStreamGetCaptureInfo_v3(stream, status, id_out, graph_out, deps_out, edges_out, count_out):
        capture_info(stream, status, id_out, graph_out, deps_out, edges_out, count_out)

    def node_dependencies(deps, count):
        if count and deps == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "dependencies is NULL")
        return [ptr(deps[i]) for i in range(count)]

    @entry
    def cuGraphCreate(out, flags):
        out[0] = handle(api.cuGraphCreate())

    @entry
    def cuGraphAddKernelNode_v2(out, graph, deps, count, p):
        f = p.func if p.func != ffi.NULL else p.kern
        grid, block = (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ)
        fn, args = api.graph_kernel_work(ptr(f), grid, block, p.sharedMemBytes,
                                         common.launch_params(f, p.kernelParams, p.extra))     # values copied now
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), fn, *args))

    @entry
    def cuGraphAddMemsetNode(out, graph, deps, count, p, ctx):
        fill = api.memset_2d_work(p.dst, p.pitch, p.value, p.elementSize, p.width, p.height)
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), fill))

    @entry
    def cuGraphAddMemcpyNode(out, graph, deps, count, p, ctx):
        copy = api.memcpy_3d_work(*common.copy_3d_args(p))
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), copy))

    @entry
    def cuGraphAddHostNode(out, graph, deps, count, p):
        fn = ffi.cast("void (*)(void *)", p.fn)
        out[0] = handle(api.graph_add_host_node(ptr(graph), node_dependencies(deps, count), fn, p.userData))

    @entry
    def cuGraphAddEmptyNode(out, graph, deps, count):
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count)))

    @entry
    def cuStreamCreateWithPriority(out, flags, priority):
        out[0] = handle(api.cuStreamCreateWithPriority(flags, priority))

    @entry
    def cuStreamGetPriority(stream, out):
        out[0] = api.stream_priority(ptr(stream))

    @entry
    def cuStreamGetFlags(stream, out):
        out[0] = api.stream_flags(ptr(stream))

    @entry
    def cuStreamGetCtx(stream, out):
        out[0] = handle(api.cuStreamGetCtx(ptr(stream)))

    @entry
    def cuStreamGetCtx_v2(stream, out, green):
        out[0] = handle(api.cuStreamGetCtx(ptr(stream)))
        if green != ffi.NULL:
            green[0] = ffi.NULL                 # no green contexts: streams belong to ordinary ones

    @entry
    def cuStreamAddCallback(stream, callback, user, flags):
        api.cuStreamAddCallback(ptr(stream), ptr(callback), ptr(user))

    @entry
    def cuEventRecordWithFlags(event, stream, flags):
        api.cuEventRecord(ptr(event), ptr(stream))

    @entry
    def cuStreamBeginCapture_v2(stream, mode):
        api.cuStreamBeginCapture(ptr(stream), mode)

    @entry
    def cuStreamEndCapture(stream, out):
        out[0] = handle(api.cuStreamEndCapture(ptr(stream)))

    @entry
    def cuStreamIsCapturing(stream, out):
        out[0] = api.cuStreamIsCapturing(ptr(stream))

    capture_mode = threading.local()

    @entry
    def cuThreadExchangeStreamCaptureMode(mode):
        old = getattr(capture_mode, "mode", 0)        # CU_STREAM_CAPTURE_MODE_GLOBAL
        capture_mode.mode = mode[0]
        mode[0] = old

    @entry
    def cuGraphInstantiateWithFlags(out, graph, flags):
        out[0] = handle(api.cuGraphInstantiate(ptr(graph)))

    @entry
    def cuGraphInstantiateWithParams(out, graph, params):
        out[0] = handle(api.cuGraphInstantiate(ptr(graph)))
        if params != ffi.NULL:
            params.result_out = 0                      # CUDA_GRAPH_INSTANTIATE_SUCCESS
            params.hErrNode_out = ffi.NULL

    @entry
    def cuGraphUpload(exec_, stream):
        api.cuGraphUpload(ptr(exec_), ptr(stream))

    @entry
    def cuGraphLaunch(exec_, stream):
        api.cuGraphLaunch(ptr(exec_), ptr(stream))

    @entry
    def cuGraphDestroy(graph):
        api.cuGraphDestroy(ptr(graph))

    @entry
    def cuGraphExecDestroy(exec_):
        api.cuGraphExecDestroy(ptr(exec_))
