import { describe, expect, it } from "vitest"
import {
  applyRules,
  describeChanges,
  describeRevert,
  execRun,
  planSteps,
  type Run,
  removeLeftovers,
  revertRules,
  splitSavedRule,
  TPROXY_DEFAULTS,
  TPROXY_TAG,
  type TproxyConfig,
  TproxyRulesError,
  validateTproxyConfig
} from "../src/services/inspector/tproxy/rules.js"

/**
 * The transparent-capture firewall rules (src/services/inspector/tproxy/rules.ts) against a fake
 * runner that records every command: validation, the order, the revert on a failed step, crash
 * cleanup from `iptables-save` output. Nothing here runs iptables; the real thing in network
 * namespaces is test/netns/tproxy-rules.netns.ts (`npm run test:netns`).
 */

type Call = readonly [string, ReadonlyArray<string>]
const line = ([command, args]: Call) => [command, ...args].join(" ")

/** A runner that records each command and answers with `answer` (success by default). */
const recorder = (
  answer: (command: string, args: ReadonlyArray<string>, index: number) => { code: number; stdout?: string; stderr?: string } = () => ({
    code: 0
  })
) => {
  const calls: Array<Call> = []
  const run: Run = async (command, args) => {
    calls.push([command, [...args]])
    const a = answer(command, args, calls.length - 1)
    return { code: a.code, stdout: a.stdout ?? "", stderr: a.stderr ?? "" }
  }
  return { calls, run, lines: () => calls.map(line) }
}

const bad = (body: unknown) => {
  const r = validateTproxyConfig(body)
  if (r.ok) throw new Error(`expected ${JSON.stringify(body)} to be refused`)
  return r
}

describe("validateTproxyConfig", () => {
  it("fills in the defaults: no body, an empty body, a partial body", () => {
    expect(TPROXY_DEFAULTS).toEqual({ dport: 443, mark: 0x2333, onPort: 8443, routeTable: 233, bypassMark: 0x539 })
    expect(validateTproxyConfig(undefined)).toEqual({ ok: true, config: TPROXY_DEFAULTS })
    expect(validateTproxyConfig(null)).toEqual({ ok: true, config: TPROXY_DEFAULTS })
    expect(validateTproxyConfig({})).toEqual({ ok: true, config: TPROXY_DEFAULTS })
    expect(validateTproxyConfig({ dport: 8443, onPort: 9443 })).toEqual({
      ok: true,
      config: { ...TPROXY_DEFAULTS, dport: 8443, onPort: 9443 }
    })
    const all = { dport: 1, mark: 0xffffffff, onPort: 65535, routeTable: 100, bypassMark: 1 }
    expect(validateTproxyConfig(all)).toEqual({ ok: true, config: all })
  })

  it("returns sudoPassword apart from the config, and never in a message", () => {
    expect(validateTproxyConfig({ sudoPassword: "hunter2" })).toEqual({ ok: true, config: TPROXY_DEFAULTS, sudoPassword: "hunter2" })
    expect(validateTproxyConfig({ sudoPassword: "" })).toEqual({ ok: true, config: TPROXY_DEFAULTS, sudoPassword: "" })
    const r = bad({ sudoPassword: 1234 })
    expect(r).toMatchObject({ field: "sudoPassword" })
    expect(r.message).toMatch(/string/)
    expect(bad({ sudoPassword: "hunter2", dport: 0 }).message).not.toContain("hunter2")
  })

  const ports = ["dport", "onPort"] as const
  const u32 = ["mark", "routeTable", "bypassMark"] as const
  it.each(ports)("%s: 1-65535 integers only", (field) => {
    for (const value of [0, -1, 65536, 100000])
      expect(bad({ [field]: value }), `${field}=${value}`).toMatchObject({ field, message: expect.stringMatching(/1 to 65535/) })
    for (const value of [1.5, Number.NaN, Number.POSITIVE_INFINITY])
      expect(bad({ [field]: value }), `${field}=${value}`).toMatchObject({ field, message: expect.stringMatching(/integer/) })
    for (const value of ["443", true, null, [443], { port: 443 }])
      expect(bad({ [field]: value }), `${field}=${JSON.stringify(value)}`).toMatchObject({
        field,
        message: expect.stringMatching(/must be an integer.*got (string|boolean|null|an array|object)/)
      })
    expect(validateTproxyConfig({ [field]: 65535 }).ok).toBe(true)
    expect(validateTproxyConfig({ [field]: 1 }).ok).toBe(true)
  })

  it.each(u32)("%s: integers from 1 to 2^32-1 only", (field) => {
    for (const value of [0, -5, 2 ** 32])
      expect(bad({ [field]: value }), `${field}=${value}`).toMatchObject({ field, message: expect.stringMatching(/from 1 to 4294967295/) })
    for (const value of [2.5, Number.NaN]) expect(bad({ [field]: value }), `${field}=${value}`).toMatchObject({ field })
    for (const value of ["0x2333", false, null, [1]])
      expect(bad({ [field]: value }), `${field}=${JSON.stringify(value)}`).toMatchObject({ field })
  })

  it("refuses the kernel's own routing tables", () => {
    for (const routeTable of [253, 254, 255])
      expect(bad({ routeTable })).toMatchObject({ field: "routeTable", message: expect.stringMatching(/main/) })
    expect(validateTproxyConfig({ routeTable: 252 }).ok).toBe(true)
    expect(validateTproxyConfig({ routeTable: 256 }).ok).toBe(true)
  })

  it("refuses a bypass mark equal to the mark, naming the field the caller set", () => {
    expect(bad({ mark: 7, bypassMark: 7 })).toMatchObject({ field: "bypassMark", message: expect.stringMatching(/differ/) })
    expect(bad({ bypassMark: 0x2333 })).toMatchObject({ field: "bypassMark" })
    // The mark alone collides with the default bypass mark: the mark is what to change.
    expect(bad({ mark: 0x539 })).toMatchObject({ field: "mark", message: expect.stringContaining("0x539") })
  })

  it("refuses unknown fields and bodies that are not objects", () => {
    expect(bad({ dPort: 443 })).toMatchObject({ field: "dPort", message: expect.stringMatching(/unknown field/) })
    expect(bad({ dport: 443, extra: true })).toMatchObject({ field: "extra" })
    for (const body of ["dport=443", 443, true, [], [{ dport: 443 }]]) expect(bad(body)).toMatchObject({ field: "body" })
  })
})

const config: TproxyConfig = { dport: 8443, mark: 0x10, onPort: 9443, routeTable: 100, bypassMark: 0x20 }
const tag = ["-m", "comment", "--comment", TPROXY_TAG]

describe("planSteps", () => {
  it("step 1, 2, 3 (two rules), 4, each for IPv4 then IPv6, every iptables rule tagged", () => {
    const steps = planSteps(config)
    expect(steps.map((s) => `${s.step}v${s.family}`)).toEqual(["1v4", "1v6", "2v4", "2v6", "3v4", "3v6", "3v4", "3v6", "4v4", "4v6"])
    expect(steps.map((s) => line(s.apply))).toEqual([
      "ip -4 rule add fwmark 0x10 lookup 100",
      "ip -6 rule add fwmark 0x10 lookup 100",
      "ip -4 route add local 0.0.0.0/0 dev lo table 100",
      "ip -6 route add local ::/0 dev lo table 100",
      "iptables -w 5 -t mangle -A OUTPUT -p tcp --dport 8443 --syn -m mark ! --mark 0x20 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -m comment --comment gateway-tproxy -j CONNMARK --set-mark 0x10",
      "ip6tables -w 5 -t mangle -A OUTPUT -p tcp --dport 8443 --syn -m mark ! --mark 0x20 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -m comment --comment gateway-tproxy -j CONNMARK --set-mark 0x10",
      "iptables -w 5 -t mangle -A OUTPUT -p tcp --dport 8443 -m mark ! --mark 0x20 -m connmark --mark 0x10 -m comment --comment gateway-tproxy -j MARK --set-mark 0x10",
      "ip6tables -w 5 -t mangle -A OUTPUT -p tcp --dport 8443 -m mark ! --mark 0x20 -m connmark --mark 0x10 -m comment --comment gateway-tproxy -j MARK --set-mark 0x10",
      "iptables -w 5 -t mangle -A PREROUTING -p tcp --dport 8443 -m mark --mark 0x10 -m comment --comment gateway-tproxy -j TPROXY --on-port 9443 --tproxy-mark 0x10",
      "ip6tables -w 5 -t mangle -A PREROUTING -p tcp --dport 8443 -m mark --mark 0x10 -m comment --comment gateway-tproxy -j TPROXY --on-port 9443 --tproxy-mark 0x10"
    ])
    for (const s of steps) {
      if (s.apply[0] === "ip") {
        expect(line(s.revert)).toBe(line(s.apply).replace(" add ", " del "))
      } else {
        expect(s.apply[1].join(" ")).toContain(tag.join(" "))
        expect(line(s.revert)).toBe(line(s.apply).replace(" -A ", " -D "))
      }
      expect(s.describe).toMatch(new RegExp(`^IPv${s.family} `))
    }
  })

  it("describeChanges is the apply commands, describeRevert their inverses backwards", () => {
    expect(describeChanges(config)).toEqual(planSteps(config).map((s) => line(s.apply)))
    expect(describeRevert(config)).toEqual(
      planSteps(config)
        .map((s) => line(s.revert))
        .reverse()
    )
    expect(describeChanges(TPROXY_DEFAULTS)[0]).toBe("ip -4 rule add fwmark 0x2333 lookup 233")
  })
})

describe("applyRules / revertRules", () => {
  it("runs the steps in order", async () => {
    const r = recorder()
    await applyRules(config, r.run)
    expect(r.lines()).toEqual(describeChanges(config))
  })

  it("a failure at step 3 reverts exactly the applied steps in reverse, then throws naming step 3 and its stderr", async () => {
    const stderr = "Warning: Extension CONNMARK revision 0 not supported, missing kernel module?\n"
    // The IPv6 CONNMARK rule (the sixth command) fails: steps 1-2 for both families and the IPv4 CONNMARK rule were applied.
    const r = recorder((command, args) => (command === "ip6tables" && args.includes("CONNMARK") ? { code: 2, stderr } : { code: 0 }))
    const error = await applyRules(config, r.run).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(error).toBeInstanceOf(TproxyRulesError)
    const e = error as TproxyRulesError
    expect(e).toMatchObject({ step: 3, family: 6, stderr, exitCode: 2, missingTool: undefined })
    expect(e.command).toBe(describeChanges(config)[5])
    expect(e.message).toMatch(/step 3 \(IPv6/)
    expect(e.message).toContain("missing kernel module?")
    const steps = planSteps(config)
    const applied = steps.slice(0, 5)
    expect(r.lines()).toEqual([...steps.slice(0, 6).map((s) => line(s.apply)), ...[...applied].reverse().map((s) => line(s.revert))])
  })

  it("a failure at the first command reverts nothing", async () => {
    const r = recorder(() => ({ code: 2, stderr: "RTNETLINK answers: Operation not permitted\n" }))
    await expect(applyRules(config, r.run)).rejects.toMatchObject({
      step: 1,
      family: 4,
      message: expect.stringContaining("Operation not permitted")
    })
    expect(r.calls).toHaveLength(1)
  })

  it("the revert still completes when its own commands fail, and a runner that rejects counts as a failed command", async () => {
    const r = recorder((command, _args, index) => {
      // The 7th command (step 3, the IPv4 MARK rule) and every later iptables one throw; the other later ones fail.
      if (command === "iptables" && index >= 6) throw new Error("boom")
      return { code: index >= 6 ? 1 : 0, stderr: "No chain/target/match by that name." }
    })
    await expect(applyRules(config, r.run)).rejects.toMatchObject({ step: 3, family: 4 })
    // 7 applies (the 7th failed), then the 6 applied reverted, every one tried though they all fail.
    expect(r.calls).toHaveLength(7 + 6)
  })

  it("a missing tool says which package to install", async () => {
    const noIptables = recorder((command) => (command === "iptables" ? { code: 127, stderr: "spawn iptables ENOENT" } : { code: 0 }))
    await expect(applyRules(config, noIptables.run)).rejects.toMatchObject({
      step: 3,
      family: 4,
      missingTool: "iptables",
      message: expect.stringContaining("apt install iptables")
    })
    const noIp = recorder(() => ({ code: 127 }))
    await expect(applyRules(config, noIp.run)).rejects.toMatchObject({
      step: 1,
      missingTool: "ip",
      message: expect.stringContaining("apt install iproute2")
    })
    // A runner that rejects with ENOENT, as a bare execFile would.
    const rejecting: Run = async (command) => {
      throw Object.assign(new Error(`spawn ${command} ENOENT`), { code: "ENOENT" })
    }
    await expect(applyRules(config, rejecting)).rejects.toMatchObject({ missingTool: "ip" })
  })

  it("revert runs every inverse in reverse order and ignores failures", async () => {
    const r = recorder(() => ({ code: 1, stderr: "RTNETLINK answers: No such file or directory" }))
    await expect(revertRules(config, r.run)).resolves.toBeUndefined()
    expect(r.lines()).toEqual(describeRevert(config))
    const throwing: Run = async () => {
      throw new Error("nope")
    }
    await expect(revertRules(config, throwing)).resolves.toBeUndefined()
  })
})

// As iptables-save v1.8.9 (nf_tables) prints them, with rules of others around ours and one of
// another config (a crash with other ports and marks), one with a quoted look-alike comment.
const SAVED_V4 = `# Generated by iptables-save v1.8.9 (nf_tables) on Wed Nov 25 06:14:36 2026
*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER-MANGLE - [0:0]
-A PREROUTING -p tcp -m tcp --dport 443 -m mark --mark 0x2333 -m comment --comment gateway-tproxy -j TPROXY --on-port 8443 --on-ip 0.0.0.0 --tproxy-mark 0x2333/0xffffffff
-A PREROUTING -j DOCKER-MANGLE
-A OUTPUT -m owner --uid-owner 1000 -j MARK --set-xmark 0x7/0xffffffff
-A OUTPUT -p tcp -m tcp --dport 443 --tcp-flags FIN,SYN,RST,ACK SYN -m mark ! --mark 0x539 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -m comment --comment gateway-tproxy -j CONNMARK --set-xmark 0x2333/0xffffffff
-A OUTPUT -p tcp -m tcp --dport 443 -m mark ! --mark 0x539 -m connmark --mark 0x2333 -m comment --comment gateway-tproxy -j MARK --set-xmark 0x2333/0xffffffff
-A OUTPUT -p tcp -m tcp --dport 443 -m mark ! --mark 0x539 -m comment --comment gateway-tproxy -j MARK --set-xmark 0x2333/0xffffffff
-A OUTPUT -p tcp -m tcp --dport 80 -m comment --comment "gateway-tproxy is not this one" -j MARK --set-xmark 0x9/0xffffffff
-A OUTPUT -p udp -m comment --comment gateway-tproxy-test -j ACCEPT
-A DOCKER-MANGLE -d 172.17.0.0/16 -j RETURN
COMMIT
# Completed on Wed Nov 25 06:14:36 2026
`
const SAVED_V6 = `# Generated by ip6tables-save v1.8.9 (nf_tables) on Wed Nov 25 06:14:36 2026
*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
[12:960] -A PREROUTING -p tcp -m tcp --dport 8443 -m mark --mark 0x10 -m comment --comment gateway-tproxy -j TPROXY --on-port 9443 --on-ip :: --tproxy-mark 0x10/0xffffffff
-A OUTPUT -p tcp -m tcp --dport 8443 -m comment --comment "something else" -j ACCEPT
COMMIT
# Completed on Wed Nov 25 06:14:36 2026
`

describe("removeLeftovers", () => {
  const saver = (answerRoutes: (args: ReadonlyArray<string>) => number = () => 1) =>
    recorder((command, args) => {
      if (command === "iptables-save") return { code: 0, stdout: SAVED_V4 }
      if (command === "ip6tables-save") return { code: 0, stdout: SAVED_V6 }
      if (command === "ip") return { code: answerRoutes(args) }
      return { code: 0 }
    })

  it("deletes only the tagged iptables lines, each with the -D built from its saved line", async () => {
    const r = saver()
    expect(await removeLeftovers(undefined, r.run)).toEqual({ removed: 5 })
    expect(r.lines()).toEqual([
      "iptables-save -t mangle",
      "iptables -w 5 -t mangle -D PREROUTING -p tcp -m tcp --dport 443 -m mark --mark 0x2333 -m comment --comment gateway-tproxy -j TPROXY --on-port 8443 --on-ip 0.0.0.0 --tproxy-mark 0x2333/0xffffffff",
      "iptables -w 5 -t mangle -D OUTPUT -p tcp -m tcp --dport 443 --tcp-flags FIN,SYN,RST,ACK SYN -m mark ! --mark 0x539 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -m comment --comment gateway-tproxy -j CONNMARK --set-xmark 0x2333/0xffffffff",
      "iptables -w 5 -t mangle -D OUTPUT -p tcp -m tcp --dport 443 -m mark ! --mark 0x539 -m connmark --mark 0x2333 -m comment --comment gateway-tproxy -j MARK --set-xmark 0x2333/0xffffffff",
      "iptables -w 5 -t mangle -D OUTPUT -p tcp -m tcp --dport 443 -m mark ! --mark 0x539 -m comment --comment gateway-tproxy -j MARK --set-xmark 0x2333/0xffffffff",
      "ip6tables-save -t mangle",
      "ip6tables -w 5 -t mangle -D PREROUTING -p tcp -m tcp --dport 8443 -m mark --mark 0x10 -m comment --comment gateway-tproxy -j TPROXY --on-port 9443 --on-ip :: --tproxy-mark 0x10/0xffffffff"
    ])
    // Arguments are passed as they were saved: `!` and the mask are single arguments, no shell between.
    expect(r.calls[2]![1]).toContain("!")
  })

  it("then the recorded config's routes and rules, every copy, routes first", async () => {
    let ruleCopies = 2
    const r = saver((args) => {
      if (args.includes("rule") && args[0] === "-4" && ruleCopies > 0) {
        ruleCopies--
        return 0
      }
      if (args.includes("route") && args[0] === "-6") return 0
      return 2
    })
    // Route -6 "succeeds" forever: bounded.
    const { removed } = await removeLeftovers(TPROXY_DEFAULTS, r.run)
    const ipLines = r.lines().filter((l) => l.startsWith("ip "))
    expect(ipLines[0]).toBe("ip -6 route del local ::/0 dev lo table 233")
    expect(ipLines).toContain("ip -4 route del local 0.0.0.0/0 dev lo table 233")
    expect(ipLines.filter((l) => l === "ip -4 rule del fwmark 0x2333 lookup 233")).toHaveLength(3)
    expect(ipLines.at(-1)).toBe("ip -4 rule del fwmark 0x2333 lookup 233")
    expect(removed).toBe(5 + 32 + 2)
  })

  it("a missing or failing iptables-save is skipped, nothing thrown", async () => {
    const r = recorder((command) => (command.endsWith("-save") ? { code: 127, stderr: "ENOENT" } : { code: 1 }))
    expect(await removeLeftovers(TPROXY_DEFAULTS, r.run)).toEqual({ removed: 0 })
    expect(r.lines().filter((l) => l.startsWith("ip "))).toHaveLength(4)
  })
})

describe("splitSavedRule", () => {
  it("keeps quoted comments whole and unescapes them", () => {
    expect(splitSavedRule(`-A OUTPUT -m comment --comment "a \\"b\\" c" -j ACCEPT`)).toEqual([
      "-A",
      "OUTPUT",
      "-m",
      "comment",
      "--comment",
      'a "b" c',
      "-j",
      "ACCEPT"
    ])
    expect(splitSavedRule(`-A X  -m comment --comment ""`)).toEqual(["-A", "X", "-m", "comment", "--comment", ""])
  })
})

describe("execRun", () => {
  it("resolves with the exit code, 127 for a command that is not installed, and never rejects", async () => {
    expect(await execRun(process.execPath, ["-e", "process.stdout.write('out'); process.stderr.write('err'); process.exit(3)"])).toEqual({
      code: 3,
      stdout: "out",
      stderr: "err"
    })
    expect(await execRun(process.execPath, ["-e", ""])).toEqual({ code: 0, stdout: "", stderr: "" })
    const missing = await execRun("gateway-no-such-command-xyz", [])
    expect(missing.code).toBe(127)
    expect(missing.stderr).toContain("ENOENT")
  })
})
