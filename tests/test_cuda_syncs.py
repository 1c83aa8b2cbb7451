"""The sync counter of the CUDA tests and ``scripts/fit_sync_check.py`` (:mod:`helpers.cuda_syncs`) counts c10's sync
warning and not the notice ``set_sync_debug_mode`` gives once per process, which also holds "synchroniz" (the one
"sync" the H200 runs had counted, in the first measured step only)."""

from helpers.cuda_syncs import is_sync


def test_a_sync_counts_and_the_modes_notice_does_not():
    assert is_sync("called a synchronizing CUDA operation")
    assert not is_sync("Synchronization debug mode is a prototype feature and does not yet detect all synchronizing "
                       "operations")
    assert not is_sync("an unrelated warning")
