"""What goes with a context: cuDevicePrimaryCtxReset and cuCtxDestroy free the memory made in
that context and end its modules, streams, events, arrays and graph execs, as a GPU's driver
does; what other contexts (and anycuda's own Python API) made stays."""
import gc
import threading
import time

import numpy as np
import pytest

from anycuda.driver import api, arrays
from anycuda.runtime import device, memory
from anycuda.runtime.errors import CudaError

FLOAT = 0x20          # CU_AD_FORMAT_FLOAT
SURFACE_LDST = 0x02   # CUDA_ARRAY3D_SURFACE_LDST


def _code(call, *args) -> str:
    with pytest.raises(CudaError) as e:
        call(*args)
    return e.value.code.name


def _reset():
    api.cuDevicePrimaryCtxReset(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))


def test_a_reset_frees_every_kind_of_allocation_and_ends_the_contexts_objects(context):
    host_buffer = np.zeros(4096, dtype=np.uint8)
    made = {
        "device": api.cuMemAlloc(1000),
        "host": api.cuMemAllocHost(1000),
        "managed": api.cuMemAllocManaged(1000, 1),
        "pitched": api.cuMemAllocPitch(100, 10, 4)[0],
        "stream-ordered": api.cuMemAllocAsync(1000, 0),
    }
    api.cuMemHostRegister(host_buffer.ctypes.data, host_buffer.nbytes)
    stream, event = api.cuStreamCreate(0), api.cuEventCreate(0)
    array = arrays.cuArrayCreate(16, 16, FLOAT, 1)
    array_base = arrays.get(array).base
    own = memory.allocate(64)                 # anycuda's Python API: no context owns it
    api.cuCtxSynchronize()
    for ptr in made.values():
        assert memory.lookup(ptr) is not None

    _reset()

    for kind, ptr in made.items():
        assert memory.lookup(ptr) is None, kind
    assert _code(api.cuMemFree, made["device"]) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(api.cuMemFreeHost, made["host"]) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(api.cuMemHostUnregister, host_buffer.ctypes.data) == "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"
    assert _code(api.cuStreamSynchronize, stream) == "CUDA_ERROR_INVALID_HANDLE"
    assert _code(api.cuEventRecord, event, 0) == "CUDA_ERROR_INVALID_HANDLE"
    assert _code(arrays.cuArrayDestroy, array) == "CUDA_ERROR_INVALID_HANDLE"
    assert memory.lookup(array_base) is None
    assert memory.lookup(own.ptr) is own
    memory.free(own.ptr)
    host_buffer[:] = 7                        # unregistered, the host's own memory is untouched
    # the context works again, with fresh memory
    p = api.cuMemAlloc(256)
    api.cuMemsetD32(p, 5, 64)
    out = np.empty(64, dtype=np.int32)
    api.cuMemcpy(out.ctypes.data, p, 256)
    assert (out == 5).all()
    api.cuMemFree(p)


def test_allocating_again_after_each_reset_does_not_grow(context):
    """Was 512 bytes more a round in fuzz_shared_window (and a GPU frees it all at a reset)."""
    def round_():
        for size in (512, 1 << 20, 3 << 21):
            api.cuMemsetD8(api.cuMemAlloc(size), 1, size)
        api.cuStreamCreate(0)
        _reset()

    round_()
    count, total, used = len(memory.table), memory.table.total(), device.used_memory(0)
    for _ in range(50):
        round_()
    assert (len(memory.table), memory.table.total()) == (count, total)
    assert device.used_memory(0) == used         # (what cuMemGetInfo takes from the device's share)


def test_destroying_a_created_context_frees_its_memory_and_no_other(context):
    kept = api.cuMemAlloc(512)
    kept_stream = api.cuStreamCreate(0)
    ctx = api.cuCtxCreate(0, 0)
    gone = api.cuMemAlloc(512)
    gone_stream = api.cuStreamCreate(0)
    api.cuCtxDestroy(ctx)
    assert memory.lookup(gone) is None
    assert memory.lookup(kept) is not None
    api.cuCtxSetCurrent(context)
    assert _code(api.cuStreamSynchronize, gone_stream) == "CUDA_ERROR_INVALID_HANDLE"
    api.cuStreamSynchronize(kept_stream)
    api.cuStreamDestroy(kept_stream)
    api.cuMemFree(kept)


def test_texture_and_surface_objects_go_with_their_context(context):
    """A reset ends the context's texture and surface objects, and lets go of the
    descriptors of those destroyed before (kept while a kernel might still read them): a
    program that made and destroyed objects in a loop kept every one."""
    from anycuda.compiler import texdesc
    from anycuda.driver import textures

    def make_objects():
        ptr = api.cuMemAlloc(1024)
        linear = textures.Resource(texdesc.RES_LINEAR, (ptr, FLOAT, 1, 1024))
        tex = textures.cuTexObjectCreate(linear, textures.TextureDesc())
        array = arrays.cuArray3DCreate(8, 8, 0, FLOAT, 1, SURFACE_LDST)
        surface = textures.cuSurfObjectCreate(textures.Resource(texdesc.RES_ARRAY, (array,)))
        return tex, surface

    tex, surface = make_objects()
    _reset()
    assert _code(textures.cuTexObjectGetResourceDesc, tex) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(textures.cuSurfObjectGetResourceDesc, surface) == "CUDA_ERROR_INVALID_VALUE"
    kept = len(textures._retired)
    for _ in range(20):
        for _ in range(5):
            tex, surface = make_objects()
            textures.cuTexObjectDestroy(tex)
            textures.cuSurfObjectDestroy(surface)
        _reset()
    assert len(textures._retired) <= kept


def test_a_graph_exec_goes_with_its_context_and_its_graph_stays(context):
    """An exec is instantiated in the current context (and ends with it); the graph, a
    description of work, can be instantiated again in the new one."""
    ran = []
    graph = api.cuGraphCreate()
    api.graph_add_node(graph, [], ran.append, "node")
    exec_ = api.cuGraphInstantiate(graph)
    api.cuGraphLaunch(exec_, 0)
    api.cuCtxSynchronize()
    assert ran == ["node"]
    _reset()
    assert _code(api.cuGraphLaunch, exec_, 0) == "CUDA_ERROR_INVALID_HANDLE"
    again = api.cuGraphInstantiate(graph)
    api.cuGraphLaunch(again, 0)
    api.cuCtxSynchronize()
    assert ran == ["node", "node"]
    api.cuGraphExecDestroy(again)
    api.cuGraphDestroy(graph)


def test_destroying_the_current_context_pops_it(context):
    """cuCtxCreate pushes; cuCtxDestroy of the current context pops it (CUDA's documented
    stack), so the context before it is current again."""
    ctx = api.cuCtxCreate(0, 0)
    assert api.cuCtxGetCurrent() == ctx
    api.cuCtxDestroy(ctx)
    assert api.cuCtxGetCurrent() == context
    api.cuMemFree(api.cuMemAlloc(64))


def test_a_destroyed_context_left_current_refuses_work(context):
    """A context destroyed while current below the top of the stack, or in another thread,
    answers CUDA_ERROR_CONTEXT_IS_DESTROYED: nothing is made in it (before, a stream made
    there outlived it with its worker thread, fuzz_api_plain's leak)."""
    below = api.cuCtxCreate(0, 0)
    top = api.cuCtxCreate(0, 0)
    api.cuCtxDestroy(below)
    assert api.cuCtxPopCurrent() == top
    assert api.cuCtxGetCurrent() == below
    for call, args in ((api.cuStreamCreate, (0,)), (api.cuMemAlloc, (64,)), (api.cuEventCreate, (0,))):
        assert _code(call, *args) == "CUDA_ERROR_CONTEXT_IS_DESTROYED", call.__name__
    api.cuCtxDestroy(top)
    api.cuCtxSetCurrent(context)

    other = api.cuCtxCreate(0, 0)
    seen = []
    ready, destroyed = threading.Event(), threading.Event()

    def elsewhere():
        api.cuCtxSetCurrent(other)
        ready.set()
        destroyed.wait(10)
        try:
            api.cuStreamCreate(0)
            seen.append("made")
        except CudaError as e:
            seen.append(e.code.name)
    t = threading.Thread(target=elsewhere)
    t.start()
    ready.wait(10)
    api.cuCtxDestroy(other)
    destroyed.set()
    t.join(10)
    assert seen == ["CUDA_ERROR_CONTEXT_IS_DESTROYED"]
    api.cuCtxSetCurrent(context)


def _stream_threads() -> int:
    return sum(t.name.startswith("anycuda-stream") for t in threading.enumerate())


def test_a_graph_does_not_keep_the_streams_that_captured_it(context):
    """A graph kept after its capture keeps no stream: a destroyed stream's worker thread
    (and its 8 MiB stack) ends, though the graph lives on and launches."""
    before = _stream_threads()
    buf = api.cuMemAlloc(64)
    host = np.zeros(64, dtype=np.uint8)
    graphs = []
    for _ in range(5):
        stream = api.cuStreamCreate(0)
        api.cuMemsetAsync(buf, 3, 64, 1, stream)         # the stream's worker starts
        api.cuStreamSynchronize(stream)
        api.cuStreamBeginCapture(stream, 0)
        api.cuMemcpyAsync(host.ctypes.data, buf, 64, stream)
        graphs.append(api.cuStreamEndCapture(stream))
        api.cuStreamDestroy(stream)
    deadline = time.monotonic() + 10
    while _stream_threads() > before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert _stream_threads() <= before
    exec_ = api.cuGraphInstantiate(graphs[-1])
    api.cuGraphLaunch(exec_, 0)
    api.cuCtxSynchronize()
    assert (host == 3).all()
    api.cuGraphExecDestroy(exec_)
    for g in graphs:
        api.cuGraphDestroy(g)
    api.cuMemFree(buf)
