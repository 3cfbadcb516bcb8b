/**
 * Installing a plugin, from a folder or a .tgz on this machine or an uploaded .tgz: its manifest
 * and settings checked, its files copied under `<DATA_DIR>/plugins/<name>/`, loaded once
 * (`onInstall`: a plugin that does not load is refused with why), its record stored, and started
 * when enabled.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { BadRequest, Conflict, PayloadTooLarge } from "../../domain/errors.js"
import type { PluginLog } from "./calls.js"
import { copyPlugin, extractTgz, InstallError, pluginPaths, readManifest } from "./install.js"
import { validateConfig } from "./manifest.js"
import type { PluginsShape } from "./Plugins.js"
import { newInstalled, type Serialized, settled, type Supervisor } from "./registry.js"
import type { Installed, PluginRecord, PluginsConfigShape } from "./state.js"

export interface InstallDeps {
  readonly dataDir: string
  readonly config: PluginsConfigShape
  readonly installed: Map<string, Installed>
  readonly serialized: Serialized
  readonly supervisor: Pick<Supervisor, "start" | "once">
  readonly save: (p: Installed) => Effect.Effect<void>
  readonly log: PluginLog
}

/** `installPath` and `installArchive`: a plugin installed (one change at a time), answered once it settled. */
export const makePluginInstall = (deps: InstallDeps): Pick<PluginsShape, "installPath" | "installArchive"> => {
  const { config } = deps
  const installFrom = makeInstallFrom(deps)

  /** A .tgz unpacked into a temporary folder (at most five times the upload limit), installed from there, the folder removed. */
  const installTgz = (bytes: Uint8Array, enable: boolean | undefined) =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gateway-plugin-"))
      const cleanup = () => fs.rmSync(dir, { recursive: true, force: true })
      yield* Effect.tryPromise({
        try: () => extractTgz(bytes, dir, config.maxUploadMb * 5 * 1024 * 1024),
        catch: (e) => new BadRequest({ message: e instanceof Error ? e.message : String(e) })
      }).pipe(Effect.tapError(() => Effect.sync(cleanup)))
      return yield* Effect.flatMap(installFrom(dir, enable, cleanup), settled)
    })

  return {
    installPath: (file, enable) =>
      Effect.gen(function* () {
        const resolved = path.resolve(file)
        const st = yield* Effect.try({
          try: () => fs.statSync(resolved),
          catch: () => new BadRequest({ message: `${resolved} does not exist on the server` })
        })
        if (st.isDirectory())
          return yield* Effect.flatMap(
            installFrom(resolved, enable, () => undefined),
            settled
          )
        if (!/\.(tgz|tar\.gz)$/.test(resolved))
          return yield* new BadRequest({ message: `${resolved} is neither a plugin folder nor a .tgz` })
        if (st.size > config.maxUploadMb * 1024 * 1024)
          return yield* new BadRequest({ message: `${resolved} is larger than ${config.maxUploadMb} MB (PLUGIN_MAX_UPLOAD_MB)` })
        return yield* installTgz(fs.readFileSync(resolved), enable)
      }),
    installArchive: (bytes, enable) =>
      Effect.gen(function* () {
        if (bytes.length > config.maxUploadMb * 1024 * 1024)
          return yield* new PayloadTooLarge({ message: `the archive is larger than ${config.maxUploadMb} MB (PLUGIN_MAX_UPLOAD_MB)` })
        return yield* installTgz(bytes, enable)
      })
  }
}

/** An install from an unpacked folder (serialized with every other change); `cleanup` runs whatever happens. */
const makeInstallFrom =
  ({ dataDir, config, installed, serialized, supervisor, save, log }: InstallDeps) =>
  (dir: string, enable: boolean | undefined, cleanup: () => void) =>
    serialized(
      Effect.gen(function* () {
        const manifest = yield* Effect.try({
          try: () => readManifest(dir),
          catch: (e) => new BadRequest({ message: (e as Error).message })
        })
        if (installed.has(manifest.name))
          return yield* new Conflict({
            message: `a plugin named ${manifest.name} is installed already: to replace it, remove it first (gateway plugins remove ${manifest.name}, or DELETE /api/plugins/${manifest.name}); its settings go with it`
          })
        const defaults = validateConfig(manifest.configSchema, {})
        if (Either.isLeft(defaults)) return yield* new BadRequest({ message: `plugin.json configSchema: ${defaults.left}` })
        const paths = pluginPaths(dataDir, manifest.name)
        yield* Effect.try({
          try: () => {
            fs.rmSync(paths.dir, { recursive: true, force: true })
            copyPlugin(dir, paths.dir)
          },
          catch: (e) =>
            new BadRequest({ message: e instanceof InstallError ? e.message : `cannot copy the plugin: ${(e as Error).message}` })
        })
        const record: PluginRecord = {
          version: manifest.version,
          enabled: enable ?? manifest.enabledByDefault === true,
          config: defaults.right,
          installedAt: new Date().toISOString(),
          disabledReason: null
        }
        const p = newInstalled(manifest.name, manifest, record, config)
        // Loaded once before anything is kept: a plugin that does not load is refused with why.
        const loaded = yield* Effect.either(supervisor.once(p, "onInstall"))
        if (Either.isLeft(loaded)) {
          fs.rmSync(paths.dir, { recursive: true, force: true })
          fs.rmSync(paths.data, { recursive: true, force: true })
          return yield* new BadRequest({ message: `the plugin ${manifest.name} did not load: ${loaded.left}` })
        }
        installed.set(p.name, p)
        yield* save(p)
        log("info", p.name, `plugin ${p.name} ${p.manifest.version} installed${record.enabled ? " and enabled" : ""}`)
        if (record.enabled) yield* supervisor.start(p)
        return p
      }).pipe(Effect.ensuring(Effect.sync(cleanup)))
    )
