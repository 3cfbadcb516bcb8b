import * as fs from "node:fs"

/** Whether `pid` runs (an exited process its parent has not collected yet, a zombie, does not). */
export const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return true
  }
}

/** The running processes whose parent is `pid` (from /proc). */
export const childrenOf = (pid: number): Array<number> =>
  fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8")
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        return Number(fields[1]) === pid && fields[0] !== "Z" ? [Number(d)] : []
      } catch {
        return []
      }
    })

/** A CPU this process may run on (the machine may hide some from it): for `taskset -c`. */
export const firstCpu = (): number => {
  const list = /Cpus_allowed_list:\s*(\d+)/.exec(fs.readFileSync("/proc/self/status", "utf8"))
  return Number(list?.[1] ?? 0)
}
