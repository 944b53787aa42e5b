"""Ranks as threads of the test process: fn(comm) on one thread per comm, every thread joined
within a bound, any exception of any rank reported."""
import threading
import traceback

JOIN_S = 60


def run_threads(comms, fn):
    results, errors = [None] * len(comms), []

    def body(i):
        try:
            results[i] = fn(comms[i])
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "a rank thread hung"
    assert not errors, "\n".join(errors)
    return results
