"""C declarations of the driver entry points the shim exports (names and types as in
cuda.h; the `_v2` names are what cuda.h's macros make programs call)."""
import re

TYPES = """
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef void (*CUhostFn)(void *userData);
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUDA_MEMCPY3D_st {
    size_t srcXInBytes; size_t srcY; size_t srcZ; size_t srcLOD; int srcMemoryType; const void *srcHost;
    CUdeviceptr srcDevice; void *srcArray; void *reserved0; size_t srcPitch; size_t srcHeight;
    size_t dstXInBytes; size_t dstY; size_t dstZ; size_t dstLOD; int dstMemoryType; void *dstHost;
    CUdeviceptr dstDevice; void *dstArray; void *reserved1; size_t dstPitch; size_t dstHeight;
    size_t WidthInBytes; size_t Height; size_t Depth;
} CUDA_MEMCPY3D;
typedef struct CUDA_KERNEL_NODE_PARAMS_st {
    CUfunction func; unsigned int gridDimX; unsigned int gridDimY; unsigned int gridDimZ;
    unsigned int blockDimX; unsigned int blockDimY; unsigned int blockDimZ; unsigned int sharedMemBytes;
    void **kernelParams; void **extra; CUkernel kern; CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct CUDA_MEMSET_NODE_PARAMS_st {
    CUdeviceptr dst; size_t pitch; unsigned int value; unsigned int elementSize; size_t width; size_t height;
} CUDA_MEMSET_NODE_PARAMS;
typedef struct CUDA_HOST_NODE_PARAMS_st { void *fn; void *userData; } CUDA_HOST_NODE_PARAMS;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
    unsigned long long flags; CUstream hUploadStream; void *hErrNode_out; int result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;
typedef struct CUmemLocation_st { int type; int id; } CUmemLocation;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUDA_MEMCPY2D_st {
    size_t srcXInBytes; size_t srcY; int srcMemoryType; const void *srcHost; CUdeviceptr srcDevice;
    void *srcArray; size_t srcPitch;
    size_t dstXInBytes; size_t dstY; int dstMemoryType; void *dstHost; CUdeviceptr dstDevice;
    void *dstArray; size_t dstPitch;
    size_t WidthInBytes; size_t Height;
} CUDA_MEMCPY2D;
typedef struct CUDA_MEMCPY3D_PEER_st {
    size_t srcXInBytes; size_t srcY; size_t srcZ; size_t srcLOD; int srcMemoryType; const void *srcHost;
    CUdeviceptr srcDevice; void *srcArray; CUcontext srcContext; size_t srcPitch; size_t srcHeight;
    size_t dstXInBytes; size_t dstY; size_t dstZ; size_t dstLOD; int dstMemoryType; void *dstHost;
    CUdeviceptr dstDevice; void *dstArray; CUcontext dstContext; size_t dstPitch; size_t dstHeight;
    size_t WidthInBytes; size_t Height; size_t Depth;
} CUDA_MEMCPY3D_PEER;
typedef size_t (*CUoccupancyB2DSize)(int blockSize);
typedef struct CUlaunchConfig_st {
    unsigned int gridDimX; unsigned int gridDimY; unsigned int gridDimZ;
    unsigned int blockDimX; unsigned int blockDimY; unsigned int blockDimZ;
    unsigned int sharedMemBytes; CUstream hStream; void *attrs; unsigned int numAttrs;
} CUlaunchConfig;
"""

FUNCTIONS = """
CUresult cuInit(unsigned int Flags);
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext *pctx, void *ctxCreateParams, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize_v2(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N);
CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
CUresult cuStreamDestroy_v2(CUstream hStream);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuCtxGetDevice(CUdevice *device);
CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx);
CUresult cuModuleGetLoadingMode(int *mode);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
CUresult cuCtxGetFlags(unsigned int *flags);
CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version);
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active);
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags);
CUresult cuDeviceGetUuid_v2(void *uuid, CUdevice dev);
CUresult cuDeviceGetUuid(void *uuid, CUdevice dev);
CUresult cuModuleLoad(CUmodule *module, const char *fname);
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, void *options, void **optionValues);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr);
CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction hfunc);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize);
CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
CUresult cuEventQuery(CUevent hEvent);
CUresult cuEventSynchronize(CUevent hEvent);
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult cuEventDestroy_v2(CUevent hEvent);
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamQuery(CUstream hStream);
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, unsigned long long flags, int *symbolStatus);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, unsigned long long flags);
CUresult cuGetExportTable(const void **ppExportTable, const void *pExportTableId);
CUresult cuGetErrorString(CUresult error, const char **pStr);
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *jitOptions, void **jitOptionsValues,
                           unsigned int numJitOptions, void *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions);
CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, void *jitOptions, void **jitOptionsValues,
                           unsigned int numJitOptions, void *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions);
CUresult cuLibraryUnload(CUlibrary library);
CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name);
CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library);
CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name);
CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel);
CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel);
CUresult cuKernelGetAttribute(int *pi, int attrib, CUkernel kernel, CUdevice dev);
CUresult cuKernelSetAttribute(int attrib, int val, CUkernel kernel, CUdevice dev);
CUresult cuFuncSetAttribute(CUfunction hfunc, int attrib, int value);
CUresult cuKernelGetName(const char **name, CUkernel hfunc);
CUresult cuFuncGetName(const char **name, CUfunction hfunc);
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy);
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy);
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes);
CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N);
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream);
CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream);
CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height);
CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height);
CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream);
CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream);
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
CUresult cuMemHostUnregister(void *p);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags);
CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
CUresult cuPointerGetAttributes(unsigned int numAttributes, int *attributes, void **data, CUdeviceptr ptr);
CUresult cuCtxSetLimit(int limit, size_t value);
CUresult cuCtxGetLimit(size_t *pvalue, int limit);
CUresult cuCtxGetCacheConfig(int *pconfig);
CUresult cuCtxSetCacheConfig(int config);
CUresult cuFuncSetCacheConfig(CUfunction hfunc, int config);
CUresult cuKernelSetCacheConfig(CUkernel kernel, int config, CUdevice dev);
CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority);
CUresult cuStreamGetPriority(CUstream hStream, int *priority);
CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags);
CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx);
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, void **pGreenCtx);
CUresult cuStreamAddCallback(CUstream hStream, void *callback, void *userData, unsigned int flags);
CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags);
CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev);
CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId);
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
CUresult cuDeviceGetP2PAttribute(int *value, int attrib, CUdevice srcDevice, CUdevice dstDevice);
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
CUresult cuCtxDisablePeerAccess(CUcontext peerContext);
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount);
CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream);
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy);
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream);
CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit);
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags);
CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks, int blockSize);
CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize);
CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize);
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream);
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, int advice, CUmemLocation location);
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, int advice, CUdevice device);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev);
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode);
CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamIsCapturing(CUstream hStream, int *captureStatus);
CUresult cuThreadExchangeStreamCaptureMode(int *mode);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);
CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams);
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphDestroy(CUgraph hGraph);
CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);
CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name);
CUresult cuLinkCreate_v2(unsigned int numOptions, void *options, void **optionValues, CUlinkState *stateOut);
CUresult cuLinkAddData_v2(CUlinkState state, int type, void *data, size_t size, const char *name,
                          unsigned int numOptions, void *options, void **optionValues);
CUresult cuLinkAddFile_v2(CUlinkState state, int type, const char *path,
                          unsigned int numOptions, void *options, void **optionValues);
CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut);
CUresult cuLinkDestroy(CUlinkState state);
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy);
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream);
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, int *captureStatus_out, unsigned long long *id_out,
                                   CUgraph *graph_out, const CUgraphNode **dependencies_out, size_t *numDependencies_out);
CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, int *captureStatus_out, unsigned long long *id_out,
                                   CUgraph *graph_out, const CUgraphNode **dependencies_out, const void **edgeData_out,
                                   size_t *numDependencies_out);
CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags);
CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams);
CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx);
CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx);
CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams);
CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies);
"""


# ---------------------------------------------------------------- CUDA arrays, texture and surface objects
# (entry points in entry_textures.py)
_TEXTURE_TYPES = """
typedef struct CUarray_st *CUarray;
typedef unsigned long long CUtexObject;
typedef unsigned long long CUsurfObject;
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width; size_t Height; int Format; unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width; size_t Height; size_t Depth; int Format; unsigned int NumChannels; unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
typedef struct CUDA_RESOURCE_DESC_st {
    int resType;
    union {
        struct { CUarray hArray; } array;
        struct { void *hMipmappedArray; } mipmap;
        struct { CUdeviceptr devPtr; int format; unsigned int numChannels; size_t sizeInBytes; } linear;
        struct { CUdeviceptr devPtr; int format; unsigned int numChannels; size_t width; size_t height;
                 size_t pitchInBytes; } pitch2D;
        struct { int reserved[32]; } reserved;
    } res;
    unsigned int flags;
} CUDA_RESOURCE_DESC;
typedef struct CUDA_TEXTURE_DESC_st {
    int addressMode[3]; int filterMode; unsigned int flags; unsigned int maxAnisotropy; int mipmapFilterMode;
    float mipmapLevelBias; float minMipmapLevelClamp; float maxMipmapLevelClamp; float borderColor[4];
    int reserved[12];
} CUDA_TEXTURE_DESC;
typedef struct CUDA_RESOURCE_VIEW_DESC_st {
    int format; size_t width; size_t height; size_t depth; unsigned int firstMipmapLevel;
    unsigned int lastMipmapLevel; unsigned int firstLayer; unsigned int lastLayer; unsigned int reserved[16];
} CUDA_RESOURCE_VIEW_DESC;
"""

_TEXTURE_FUNCTIONS = """
CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray);
CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray);
CUresult cuArrayDestroy(CUarray hArray);
CUresult cuMipmappedArrayCreate(void **pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                unsigned int numMipmapLevels);
CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray, void *hMipmappedArray, unsigned int level);
CUresult cuMipmappedArrayDestroy(void *hMipmappedArray);
CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray);
CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray);
CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount);
CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount);
CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount);
CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount);
CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream);
CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc, const CUDA_TEXTURE_DESC *pTexDesc,
                           const CUDA_RESOURCE_VIEW_DESC *pResViewDesc);
CUresult cuTexObjectDestroy(CUtexObject texObject);
CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject);
CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject);
CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc, CUtexObject texObject);
CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc);
CUresult cuSurfObjectDestroy(CUsurfObject surfObject);
CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject);
"""

TYPES += _TEXTURE_TYPES
FUNCTIONS += _TEXTURE_FUNCTIONS

# The driver functions whose NULL stream means the calling thread's per-thread default stream
# when called under a second name: what cuda.h's macros make a program built with
# `nvcc --default-stream per-thread` (or -DCUDA_API_PER_THREAD_DEFAULT_STREAM) call, and what
# cuGetProcAddress hands out under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (the CUDA
# runtime asks for both tables). `_ptds`: blocking copies and memsets, ordered with that
# stream; `_ptsz`: calls that take a stream.
PER_THREAD_SUFFIXES = {
    "_ptds": """cuMemcpy cuMemcpyPeer cuMemcpyHtoD_v2 cuMemcpyDtoH_v2 cuMemcpyDtoD_v2 cuMemcpyDtoA_v2
        cuMemcpyAtoD_v2 cuMemcpyHtoA_v2 cuMemcpyAtoH_v2 cuMemcpyAtoA_v2 cuMemcpy2D_v2
        cuMemcpy2DUnaligned_v2 cuMemcpy3D_v2 cuMemcpy3DPeer cuMemsetD8_v2 cuMemsetD16_v2 cuMemsetD32_v2
        cuMemsetD2D8_v2 cuMemsetD2D16_v2 cuMemsetD2D32_v2""",
    "_ptsz": """cuLaunchKernel cuLaunchKernelEx cuLaunchCooperativeKernel cuLaunchHostFunc
        cuMemcpyAsync cuMemcpyPeerAsync cuMemcpyHtoDAsync_v2 cuMemcpyDtoHAsync_v2 cuMemcpyDtoDAsync_v2
        cuMemcpyHtoAAsync_v2 cuMemcpyAtoHAsync_v2 cuMemcpy2DAsync_v2 cuMemcpy3DAsync_v2
        cuMemcpy3DPeerAsync cuMemcpyBatchAsync_v2 cuMemcpy3DBatchAsync_v2
        cuMemsetD8Async cuMemsetD16Async cuMemsetD32Async cuMemsetD2D8Async cuMemsetD2D16Async
        cuMemsetD2D32Async cuMemAllocAsync cuMemAllocFromPoolAsync cuMemFreeAsync cuMemPrefetchAsync_v2
        cuMemPrefetchBatchAsync cuMemDiscardBatchAsync cuMemDiscardAndPrefetchBatchAsync
        cuMemBatchDecompressAsync cuMemMapArrayAsync
        cuStreamSynchronize cuStreamQuery cuStreamWaitEvent cuStreamAddCallback cuStreamAttachMemAsync
        cuStreamGetPriority cuStreamGetFlags cuStreamGetId cuStreamGetDevice cuStreamGetCtx
        cuStreamGetCtx_v2 cuStreamGetAttribute cuStreamSetAttribute cuStreamCopyAttributes
        cuStreamBeginCapture_v2 cuStreamBeginCaptureToGraph cuStreamEndCapture cuStreamIsCapturing
        cuStreamGetCaptureInfo_v3 cuStreamUpdateCaptureDependencies_v2 cuStreamBatchMemOp_v2
        cuStreamWaitValue32_v2 cuStreamWaitValue64_v2 cuStreamWriteValue32_v2 cuStreamWriteValue64_v2
        cuEventRecord cuEventRecordWithFlags cuGraphLaunch cuGraphUpload cuGraphInstantiateWithParams
        cuGraphicsMapResources cuGraphicsUnmapResources cuSignalExternalSemaphoresAsync
        cuWaitExternalSemaphoresAsync""",
}
PER_THREAD_NAMES = {name: name + suffix for suffix, names in PER_THREAD_SUFFIXES.items() for name in names.split()}


def _per_thread_declarations(functions: str) -> str:
    """The declaration of each per-thread variant of a function declared in `functions`: the
    same parameters under the suffixed name."""
    found = re.finditer(r"CUresult\s+(\w+)\s*\(([^;]*)\);", functions)
    return "".join(f"CUresult {PER_THREAD_NAMES[m[1]]}({m[2]});\n" for m in found if m[1] in PER_THREAD_NAMES)


FUNCTIONS += _per_thread_declarations(FUNCTIONS)
