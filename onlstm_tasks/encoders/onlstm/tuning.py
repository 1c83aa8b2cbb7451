"""The ON-LSTM back ends' tuning constants, in one place (flashrnn's habit). None changes a result: each trades
speed only, and the tests hold every back end to the reference cell whatever they are.

The compiled kernels keep theirs in ``onlstm_tasks/native/csrc/onlstm_cpu.cpp`` (panels of 16 columns, blocks of
at most 6 rows summed in registers; ``STREAMS`` there and in :mod:`onlstm_tasks.native.onlstm`).
"""

# The loop back ends (backends/loop)
SHRINK = 0.75  # a new run of steps starts when the running rows fall to this share of the run's rows
WIDE = 1024  # the backward's products at least this wide go through the compiled product (compiled steps only)
FULL_MAPS_KEPT = 64  # index maps of full batches kept across calls (by shape), at most

# The Triton kernels (backends/triton): chosen so that the sm_90 builds at the shipped sizes (hidden 256, 400, 1150)
# spill no register (scripts/compile_triton_kernels.py prints registers and spills; a slow test holds them to 0).
MAX_ROWS = 64  # batch rows per program, at most (a step's product has M = the rows, at least 16 for tl.dot)
MIN_NEURONS = 16  # neurons per program, at least (tl.dot's N)
MAX_NEURONS = 128  # neurons per program, at most
BLOCK_K = 16  # depth of each block of the recurrent product
LEVEL_VALUES_PER_WARP = 256  # rows x padded levels per warp, at most: the [rows, levels] master-gate tensors
STAGES = 1  # software-pipelining stages of the product's loop (more spill registers at these tile sizes)
