// Special registers: thread/block indices in three dimensions and the others.
extern "C" __global__ void indices(unsigned* out) {
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned* o = out + 12 * (b * blockDim.x * blockDim.y * blockDim.z + t);
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
    o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
    o[6] = blockDim.x; o[7] = blockDim.y; o[8] = blockDim.z;
    o[9] = gridDim.x; o[10] = gridDim.y; o[11] = gridDim.z;
}

extern "C" __global__ void misc(unsigned* out, unsigned long long* clocks) {
    unsigned t = threadIdx.x + blockIdx.x * blockDim.x;
    unsigned lane, warp, nsm, lt, le, eq, ge, gt, dyn, total;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm("mov.u32 %0, %%warpid;" : "=r"(warp));
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm("mov.u32 %0, %%lanemask_le;" : "=r"(le));
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    asm("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    asm("mov.u32 %0, %%total_smem_size;" : "=r"(total));
    unsigned* o = out + 10 * t;
    o[0] = lane; o[1] = warp; o[2] = nsm; o[3] = lt; o[4] = le; o[5] = eq; o[6] = ge; o[7] = gt; o[8] = dyn; o[9] = total;
    long long c0 = clock64();
    unsigned long long g0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    float x = 0;
    for (int k = 0; k < 1000; ++k) x += sinf(k * 0.001f);
    long long c1 = clock64();
    unsigned long long g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    clocks[4 * t] = c0; clocks[4 * t + 1] = c1 + (x > 1e30f); clocks[4 * t + 2] = g0; clocks[4 * t + 3] = g1;
}

extern "C" __global__ void tiny(int* out, unsigned last) {
    if (blockIdx.x == 0 || blockIdx.x == last) atomicAdd(out, (int)blockIdx.x + 1);
}

// The special registers read directly, in a 3-D block whose size is not a multiple of 32
#define NS 20
extern "C" __global__ void registers_3d(unsigned* out, unsigned long long* wide) {
    __shared__ int pad[250];                               // 1000 bytes of static shared memory
    unsigned r[NS];
    asm("mov.u32 %0, %%tid.x;" : "=r"(r[0]));    asm("mov.u32 %0, %%tid.y;" : "=r"(r[1]));
    asm("mov.u32 %0, %%tid.z;" : "=r"(r[2]));    asm("mov.u32 %0, %%ntid.x;" : "=r"(r[3]));
    asm("mov.u32 %0, %%ntid.y;" : "=r"(r[4]));   asm("mov.u32 %0, %%ntid.z;" : "=r"(r[5]));
    asm("mov.u32 %0, %%ctaid.x;" : "=r"(r[6]));  asm("mov.u32 %0, %%ctaid.y;" : "=r"(r[7]));
    asm("mov.u32 %0, %%ctaid.z;" : "=r"(r[8]));  asm("mov.u32 %0, %%nctaid.x;" : "=r"(r[9]));
    asm("mov.u32 %0, %%nctaid.y;" : "=r"(r[10])); asm("mov.u32 %0, %%nctaid.z;" : "=r"(r[11]));
    asm("mov.u32 %0, %%laneid;" : "=r"(r[12]));  asm("mov.u32 %0, %%warpid;" : "=r"(r[13]));
    asm("mov.u32 %0, %%nwarpid;" : "=r"(r[14])); asm("mov.u32 %0, %%smid;" : "=r"(r[15]));
    asm("mov.u32 %0, %%nsmid;" : "=r"(r[16]));   asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r[17]));
    asm("mov.u32 %0, %%total_smem_size;" : "=r"(r[18])); asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r[19]));
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned g = b * blockDim.x * blockDim.y * blockDim.z + t;
    pad[t % 250] = t;
    __syncthreads();
    for (int k = 0; k < NS; ++k) out[NS * g + k] = r[k];
    unsigned long long grid_id, c0, c1;
    unsigned clk0, clk1;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid_id));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0));
    asm volatile("mov.u32 %0, %%clock;" : "=r"(clk0));
    __syncthreads();
    asm volatile("mov.u32 %0, %%clock;" : "=r"(clk1));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1));
    wide[4 * g] = grid_id; wide[4 * g + 1] = c0; wide[4 * g + 2] = c1; wide[4 * g + 3] = clk1 - clk0 + (pad[0] != 0);
}
