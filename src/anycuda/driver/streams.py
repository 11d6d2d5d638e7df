"""Streams, events, stream capture and graphs: where work goes (`submit`), in stream order.

Stream 0 is the legacy default stream, or the calling thread's per-thread default stream when
the call came in through a per-thread entry point (call_with_per_thread_default).

A captured graph is the work its streams were given, in the order it was given: a valid
order for the graph's dependencies (work joins a capture only through event waits on work
already captured). Launching the graph issues that work again on the launch stream, with
the parameters captured (kernel arguments are copied when captured, as CUDA does).
"""
from __future__ import annotations

import ctypes
import threading

from ..runtime import profile
from ..runtime.errors import CudaError, CUresult
from ..runtime.stream import Event, HostFunction, Stream, default_stream, get_elapsed_time, hold, per_thread_stream
from .handles import (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, _current, _current_device, _drop_handle, EventHandle,
                      _current_handle, _faults_are_sticky, _get, _handles, _lock, _new_handle, _require_context,
                      StreamHandle)


def _check_stream_device(stream: int) -> int:
    """The current device, after checking that `stream` belongs to it (a kernel cannot be
    launched into another device's stream: CUDA_ERROR_INVALID_HANDLE, as CUDA answers)."""
    dev = _current_device()
    if stream not in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD):
        s = _get(stream, StreamHandle)
        if s.device != dev:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                            f"the stream belongs to device {s.device}, the current context to device {dev}")
    return dev


def cuStreamCreate(flags: int) -> int:
    _require_context()
    return _new_handle(StreamHandle(Stream(non_blocking=bool(flags & 1), device=_current_device())))


def cuStreamGetCtx(stream: int) -> int:
    """The context a stream was created in; the NULL, legacy and per-thread streams are the
    current context's."""
    if stream in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD):
        _require_context()
        return _current.ctx
    return _get(stream, StreamHandle).context


def cuStreamDestroy(stream: int) -> None:
    s = _get(stream, StreamHandle)
    s.stream.synchronize()
    with _lock:
        _drop_handle(stream)


@_faults_are_sticky
def cuStreamSynchronize(stream: int) -> None:
    _require_context()
    _stream(stream).synchronize()


# .per_thread: the call came in through a per-thread entry point (cuLaunchKernel_ptsz,
# cuMemcpyHtoD_v2_ptds...: what `nvcc --default-stream per-thread` makes the CUDA runtime call)
_calling = threading.local()


def call_with_per_thread_default(fn, *args):
    """fn(*args) with stream 0 and the blocking copies and memsets meaning the calling
    thread's per-thread default stream instead of the legacy one."""
    before = getattr(_calling, "per_thread", False)
    _calling.per_thread = True
    try:
        return fn(*args)
    finally:
        _calling.per_thread = before


def _null_stream():
    """What stream 0 means for this call: the legacy default stream, or the calling thread's
    per-thread default stream on the current device (see call_with_per_thread_default)."""
    if getattr(_calling, "per_thread", False):
        return per_thread_stream(_current_device())
    return default_stream


def _stream(stream: int):
    """The stream a handle names: CU_STREAM_LEGACY is the legacy default stream;
    CU_STREAM_PER_THREAD the calling thread's per-thread default stream on the current device;
    0 either of them (_null_stream)."""
    if stream == 0:
        return _null_stream()
    if stream == CU_STREAM_LEGACY:
        return default_stream
    if stream == CU_STREAM_PER_THREAD:
        return per_thread_stream(_current_device())
    return _get(stream, StreamHandle).stream


def wait_for_stream(stream: int) -> None:
    """Wait for a stream's work, as a library's synchronous call does: no context needed, since
    a program may call a library before anything that makes one current."""
    _stream(stream).synchronize()


def cuEventCreate(flags: int) -> int:
    _require_context()
    return _new_handle(EventHandle(Event()))


def cuEventRecord(event: int, stream: int) -> None:
    _require_context()
    ev = _get(event, EventHandle)
    default = stream in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)
    dev = _current_device() if default else _get(stream, StreamHandle).device
    if dev != ev.device:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                        f"the event belongs to device {ev.device}, the stream to device {dev}")
    graph = _capturing(stream)
    if graph is not None:
        ev.captured_by = graph           # a point in the graph: streams that wait on it join the capture
        return
    ev.captured_by = None
    ev.event.record(_stream(stream))


def cuEventQuery(event: int) -> None:
    if not _get(event, EventHandle).event.query():
        raise CudaError(CUresult.CUDA_ERROR_NOT_READY)


@_faults_are_sticky
def cuEventSynchronize(event: int) -> None:
    _get(event, EventHandle).event.synchronize()


def cuEventElapsedTime(start: int, end: int) -> float:
    first, second = _get(start, EventHandle), _get(end, EventHandle)
    if first.device != second.device:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "the events belong to different devices")
    return get_elapsed_time(first.event, second.event)


def cuEventDestroy(event: int) -> None:
    _get(event, EventHandle)
    with _lock:
        del _handles[event]


def cuStreamWaitEvent(stream: int, event: int) -> None:
    _require_context()
    _wait_event(stream, event)


def cuStreamQuery(stream: int) -> None:
    _require_context()
    if not _stream(stream).query():
        raise CudaError(CUresult.CUDA_ERROR_NOT_READY)


def cuLaunchHostFunc(stream: int, fn: int, user_data: int) -> None:
    _require_context()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fn)
    submit(stream, HostFunction(call), user_data)


def cuStreamCreateWithPriority(flags: int, priority: int) -> int:
    _require_context()
    return _new_handle(StreamHandle(Stream(non_blocking=bool(flags & 1), priority=priority,
                                           device=_current_device())))


def stream_flags(stream: int) -> int:
    return int(bool(_stream(stream).non_blocking))


def stream_priority(stream: int) -> int:
    return getattr(_stream(stream), "priority", 0)


def cuStreamAddCallback(stream: int, fn: int, user_data: int) -> None:
    """CUstreamCallback(stream, status, userData), run in stream order."""
    _require_context()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)(fn)
    submit(stream, HostFunction(call), stream or None, 0, user_data)


class Graph:
    def __init__(self):
        self.work = []               # (function, args) in capture (or node creation) order
        self.streams = set()         # the capture states (_capture_holder) of the streams capturing into it
        self.id = 0


class GraphNode:
    def __init__(self, graph: Graph, index: int):
        self.graph = graph
        self.index = index           # position in graph.work: creation order respects dependencies


class GraphExec:
    def __init__(self, graph: Graph):
        self.work = list(graph.work)
        self.context = _current_handle()     # instantiated in a context, it goes with it


def cuGraphCreate() -> int:
    _require_context()
    return _new_handle(Graph())


def graph_add_node(graph: int, dependencies, fn=None, *args) -> int:
    """A node of an explicitly built graph, doing fn(*args) (nothing for an empty node).
    Its dependencies exist already, so creation order is an order that respects them."""
    g = _get(graph, Graph)
    for d in dependencies:
        if _get(d, GraphNode).graph is not g:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
    g.work.append((fn or (lambda: None), args))
    return _new_handle(GraphNode(g, len(g.work) - 1))


def graph_add_host_node(graph: int, dependencies, fn, user_data) -> int:
    """A host node: `fn(user_data)` on the launch stream's own thread (HostFunction)."""
    return graph_add_node(graph, dependencies, HostFunction(fn), user_data)


_capture_ids = [0]


class _PerThreadCapture:
    """The capture state of a host thread's per-thread default stream on one device."""
    capture = None


_per_thread_captures = threading.local()      # .holders: device -> _PerThreadCapture


def _legacy(stream: int) -> bool:
    """Whether `stream` names the legacy default stream for this call (CU_STREAM_LEGACY, or 0
    outside a per-thread entry point): never captured."""
    return stream == CU_STREAM_LEGACY or stream == 0 and not getattr(_calling, "per_thread", False)


def _capture_holder(stream: int, create: bool = False):
    """What keeps `stream`'s capture state (`.capture`, the graph or None): its StreamHandle, or
    the calling thread's per-thread stream's _PerThreadCapture (None until `create`d); None
    for the legacy default stream, which is never captured."""
    if _legacy(stream):
        return None
    if stream not in (0, CU_STREAM_PER_THREAD):
        return _get(stream, StreamHandle)
    holders = _per_thread_captures.__dict__.setdefault("holders", {})
    if not holders and not create:    # this thread never captured: no device to look up
        return None
    device = _current_device()
    if create and device not in holders:
        holders[device] = _PerThreadCapture()
    return holders.get(device)


def _capturing(stream: int):
    """The graph a stream is capturing into, or None."""
    holder = _capture_holder(stream)
    return holder.capture if holder is not None else None


def submit(stream, fn, *args, on_skip=None) -> None:
    """Work for a stream: run in stream order, or recorded when the stream is capturing.
    `on_skip()` runs instead when the stream skips the work after an unreported error.
    Stream None: blocking work on the default stream (a cuMemcpy, cuMemsetD8; _null_stream), which
    returns when it is done and reports the error the stream kept. Work other than a host
    function may run on a host thread that waits for the stream (runtime/stream.py)."""
    device_work = not isinstance(fn, HostFunction)
    if profile.ENABLED:                  # a library call's work, timed under its name
        fn = profile.timed(fn)
    if stream is None:
        _null_stream().call(fn, *args)
        return
    if _legacy(stream):
        # (each launch asks: no capture lookups)
        default_stream.enqueue(fn, *args, on_skip=on_skip, any_thread=device_work)
        return
    graph = _capturing(stream)
    if graph is not None:
        graph.work.append((fn, args))
        return
    _stream(stream).enqueue(fn, *args, on_skip=on_skip, any_thread=device_work)


def _wait_event(stream: int, event: int) -> None:
    ev = _get(event, EventHandle)
    graph = getattr(ev, "captured_by", None)
    if graph is not None:
        mine = _capturing(stream)
        if mine is not None and mine is not graph:
            raise CudaError(CUresult.CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "the event belongs to another capture")
        if mine is None:             # fork: this stream joins the capture
            s = _capture_holder(stream, create=True)
            if s is None:
                raise CudaError(CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                                "the legacy default stream cannot join a capture")
            s.capture = graph
            graph.streams.add(s)
        return
    if _capturing(stream) is not None:
        # waiting on work outside the capture: it has happened before the graph can run
        ev.event.synchronize()
        return
    _stream(stream).wait_event(ev.event)


def cuStreamBeginCapture(stream: int, mode: int = 0) -> None:
    _require_context()
    s = _capture_holder(stream, create=True)
    if s is None:
        raise CudaError(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                        "the legacy default stream cannot be captured")
    if s.capture is not None:
        raise CudaError(CUresult.CUDA_ERROR_ILLEGAL_STATE, "the stream is capturing already")
    s.capture = Graph()
    hold(+1)            # no library work runs on the caller's thread while a graph is recorded
    s.capture.streams.add(s)
    _capture_ids[0] += 1
    s.capture.id = _capture_ids[0]


def cuStreamEndCapture(stream: int) -> int:
    _require_context()
    s = _capture_holder(stream)
    graph = s.capture if s is not None else None
    if graph is None:
        raise CudaError(CUresult.CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing")
    for joined in graph.streams:     # streams that joined the capture leave it too
        joined.capture = None
    # (and the graph forgets them: a graph kept for its launches kept each stream that had
    # captured into it, and so its worker thread and 8 MiB stack: fuzz_api_plain's threads
    # grew by ~140 a thousand sequences)
    graph.streams.clear()
    hold(-1)
    return _new_handle(graph)


def cuStreamIsCapturing(stream: int) -> int:
    """CU_STREAM_CAPTURE_STATUS_NONE (0) or _ACTIVE (1)."""
    return int(_capturing(stream) is not None)


def capture_id(stream: int) -> int:
    graph = _capturing(stream)
    return graph.id if graph is not None else 0


def cuGraphInstantiate(graph: int) -> int:
    _require_context()
    return _new_handle(GraphExec(_get(graph, Graph)))


def cuGraphLaunch(exec_: int, stream: int) -> None:
    _require_context()
    for fn, args in _get(exec_, GraphExec).work:
        submit(stream, fn, *args)


def cuGraphDestroy(graph: int) -> None:
    _get(graph, Graph)
    with _lock:
        del _handles[graph]


def cuGraphExecDestroy(exec_: int) -> None:
    _get(exec_, GraphExec)
    with _lock:
        del _handles[exec_]


def cuGraphUpload(exec_: int, stream: int) -> None:
    """Nothing to upload: the graph's work runs where it is."""
    _get(exec_, GraphExec)
    _stream(stream)
