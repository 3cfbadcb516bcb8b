import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { type Exec, installCa, removeCa, TRUST_SLOT, TrustStoreError } from "../src/services/inspector/tproxy/trustStore.js"

/**
 * The transparent-capture CA's slot in the system trust store (src/services/inspector/tproxy/trustStore.ts),
 * against a store in a temp directory whose "update" command is a real script that rebuilds a
 * bundle from the directory, as update-ca-certificates does. The real store is exercised in
 * `npm run test:netns`, under a private mount namespace.
 */
const dirs: Array<string> = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const store = () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), "gw-trust-"))
  dirs.push(base)
  const dir = path.join(base, "ca-certificates")
  fs.mkdirSync(dir)
  const update = path.join(base, "update")
  fs.writeFileSync(update, `#!/bin/sh\ncat ${dir}/*.crt > ${base}/bundle.crt 2>/dev/null || : > ${base}/bundle.crt\n`, { mode: 0o755 })
  return { base, dir, update, bundle: path.join(base, "bundle.crt"), stores: [{ dir, update }] }
}

const realExec: Exec = (command, args, input) =>
  new Promise((resolve) => {
    const child = execFile(command, [...args], (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) || 1 : 0, stdout, stderr })
    )
    if (input !== undefined) child.stdin?.end(input)
  })

const PEM = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

describe("the transparent-capture CA in the trust store", () => {
  it("as root: writes its own slot, rebuilds the store, and removing it rebuilds the store without it; other files stay", async () => {
    const s = store()
    fs.writeFileSync(path.join(s.dir, "someone-else.crt"), "OTHER\n")
    const slot = await installCa(PEM, { exec: realExec, root: true, stores: s.stores })
    expect(slot).toBe(path.join(s.dir, TRUST_SLOT))
    expect(fs.readFileSync(slot, "utf8")).toBe(PEM)
    expect(fs.statSync(slot).mode & 0o777).toBe(0o644)
    expect(fs.readFileSync(s.bundle, "utf8")).toContain("MIIBtest")
    expect(await removeCa({ exec: realExec, root: true, stores: s.stores })).toBe(true)
    expect(fs.existsSync(slot)).toBe(false)
    expect(fs.readFileSync(s.bundle, "utf8")).toBe("OTHER\n")
    expect(fs.readFileSync(path.join(s.dir, "someone-else.crt"), "utf8")).toBe("OTHER\n")
    // Safe at any time: nothing to remove is no error, and no rebuild.
    expect(await removeCa({ exec: realExec, root: true, stores: s.stores })).toBe(false)
  })

  it("not root: goes through sudo -S with the password on standard input, never on the command line", async () => {
    const s = store()
    const calls: Array<{ command: string; args: ReadonlyArray<string>; input: string | undefined }> = []
    const exec: Exec = async (command, args, input) => {
      calls.push({ command, args, input })
      return { code: 0, stdout: "", stderr: "" }
    }
    await installCa(PEM, { exec, root: false, sudoPassword: "s3cret pass", stores: s.stores })
    expect(calls.map((c) => [c.command, ...c.args])).toEqual([
      ["sudo", "-S", "-p", "", "tee", path.join(s.dir, TRUST_SLOT)],
      ["sudo", "-S", "-p", "", s.update]
    ])
    expect(calls[0]!.input).toBe(`s3cret pass\n${PEM}`)
    expect(calls.every((c) => !c.args.join(" ").includes("s3cret"))).toBe(true)
  })

  it("not root without a password, or a store this system does not have: a clear error, nothing written", async () => {
    const s = store()
    const error = await installCa(PEM, { exec: realExec, root: false, stores: s.stores }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TrustStoreError)
    expect(error).toMatchObject({ reason: "permission", message: expect.stringContaining("no sudoPassword") })
    expect(fs.existsSync(path.join(s.dir, TRUST_SLOT))).toBe(false)
    const none = await installCa(PEM, {
      exec: realExec,
      root: true,
      stores: [{ dir: path.join(s.base, "missing"), update: "true" }]
    }).catch((e: unknown) => e)
    expect(none).toMatchObject({ reason: "unsupported", message: expect.stringContaining("trust the CA by hand") })
  })
})
