"""The stream state machine, top to bottom (internal: not for plugins to import).

(runtime.Worker   one process: signals, executors, background jobs)
  Executor        one processor: owns partitions of its stream
    Runner        the partitions currently owned: one fetcher, one consumer each
      Fetcher     reads entries from the transport into bounded inboxes
      Consumer    runs the processor function over one partition's inbox
        Events    what the processor iterates: inbox -> middleware -> processor,
                  acknowledging each item once its loop iteration has finished
"""
