/**
 * Where the gateway's optional Node-API addon is (native/, built by `npm install`; native/README.md):
 * the transparent-capture sockets (src/services/inspector/tproxy/native.ts), the SQLite writer
 * thread's scheduling policy (src/platform/store/SqliteWriterThread.ts) and the C heap's trim
 * (src/platform/system/MallocTrim.ts) load it from here. The same path from src/ (vitest, tsx),
 * dist/ and dist/bundle/ alike.
 */
import { existsSync } from "node:fs"
import * as path from "node:path"
import { PACKAGE_ROOT } from "../../kernel/packageRoot.js"

export const NATIVE_ADDON_PATH: string = path.join(PACKAGE_ROOT, "native", "build", "Release", "gateway_tproxy.node")

/** The addon's path when it can be loaded here (Linux, built), else undefined. */
export const nativeAddonPath = (): string | undefined =>
  process.platform === "linux" && existsSync(NATIVE_ADDON_PATH) ? NATIVE_ADDON_PATH : undefined
