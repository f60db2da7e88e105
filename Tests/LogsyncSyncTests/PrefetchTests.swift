import Dispatch
import LogsyncPlatform
import Testing

@Suite("prefetch")
struct PrefetchTests {
    @Test("a prefetch runs its work on another thread and hands the value over, more than once")
    func valueFromAnotherThread() {
        let gate = DispatchSemaphore(value: 0)
        // Run inline, the work would wait for a signal that only comes after `init` returns, and give -1.
        let prefetch = Prefetch { gate.wait(timeout: .now() + 10) == .success ? 42 : -1 }
        gate.signal()
        #expect(prefetch.value() == 42)
        #expect(prefetch.value() == 42)
    }
}
