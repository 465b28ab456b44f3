//! External semaphores, and signals, waits and stream memory operations under capture.

use super::run;

#[test]
fn external_semaphores_are_imported_from_descriptors_and_validated() {
    let f = run("sim_semaphores", "semaphores");
    f.expect_all(&[
        ("import_binary", "0"),
        ("binary_fd_taken", "1"),
        ("import_timeline", "0"),
        // A documented type the simulator does not have, and the descriptor stays the
        // program's.
        ("import_win32", "801"),
        ("refused_fd_kept", "1"),
        ("import_unknown_type", "1"),
        ("import_flags", "1"),
        ("import_closed_fd", "1"),
        ("import_null", "1"),
        ("signal", "0"),
        ("wait", "0"),
        ("signal_ptsz", "0"),
        ("wait_ptsz", "0"),
        ("count_zero", "0"),
        ("null_arrays", "1"),
        ("signal_flags", "1"),
        ("signal_destroyed", "400"),
        ("destroy_again", "400"),
    ]);
}

#[test]
fn captured_signals_waits_and_memory_operations_are_nodes_every_launch_runs() {
    let f = run("sim_semaphores", "semaphores");
    f.expect_all(&[
        ("captured_signal", "0"),
        ("captured_wait", "0"),
        ("captured_write", "0"),
        ("captured_value_wait", "0"),
        // Captured, not run.
        ("written_before_launch", "0"),
        // A node per semaphore, then per operation.
        ("captured_types", "8 8 9 12 12"),
        ("launch", "0"),
        ("written_by_launch", "42"),
        ("launch_destroyed", "0"),
    ]);
}
