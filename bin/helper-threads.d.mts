/** GATEWAY_V8_HELPER_NICE: 10 when unset or empty, a whole number 0-19, or an Error naming the value. */
export declare const parseHelperNice: (text: string | undefined) => number | Error
/** The number of threads libuv's pool has, read from UV_THREADPOOL_SIZE as libuv reads it. */
export declare const uvPoolSize: (text: string | undefined) => number
/** Which of a process's threads ([id, name]) are node's start-up helpers. */
export declare const helperThreads: (threads: ReadonlyArray<readonly [number, string]>, pid: number, pool: number) => Array<number>
/** Raises the nice of node's start-up helper threads to `nice` when this process may run on one CPU. */
export declare const lowerHelperThreads: (nice: number) => Promise<void>
/** Whether node options (execArgv and NODE_OPTIONS, as one text) start a profiler. */
export declare const startsProfiler: (options: string) => boolean
