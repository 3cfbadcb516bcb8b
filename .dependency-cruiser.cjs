// The layers of src/ (docs/ARCHITECTURE.md, "The layer map"), checked by `npm test`
// (`npm run lint:layers`). Each layer imports only the layers below it:
//
//   domain → kernel → platform → upstream → services → inference → management → server → cli
//
// "Runs code" means an import that survives compilation; `import type` is erased, so it can
// neither close a load-order cycle nor run anything above. Domain and kernel are held to more:
// domain imports nothing of the gateway at all, and the kernel knows no transport and no
// feature (see the exception list at the end for the types it names).
/** @type {import('dependency-cruiser').IConfiguration} */
const LAYERS = ["domain", "kernel", "platform", "upstream", "services", "inference", "management", "server", "cli"]
const above = (layer) => LAYERS.slice(LAYERS.indexOf(layer) + 1)
const folders = (names) => `^src/(${names.join("|")})/`

/**
 * Known exceptions: a runtime import that points up a layer, each with its reason. Few, and each
 * one is a decision, not an accident.
 */
const EXCEPTIONS = [
  {
    from: "^src/services/skills/SkillCatalog[.]ts$",
    to: "^src/cli/skills/generate[.]ts$",
    reason:
      "`POST /api/agent-skills/generate` regenerates the skills from every surface's definitions (the inference routes, the management API, the CLI): the generator lives with the CLI, at the top, and the catalog loads it by a dynamic import on first use, so serving skills loads none of it."
  }
]

module.exports = {
  forbidden: [
    {
      name: "no-runtime-cycle",
      comment:
        "Modules that run code must not import each other in a ring: the load order would decide which one sees the other half-initialised. A ring closed by a dynamic import (`await import(...)`, how the CLI loads each command's implementation and the skill catalog its generator) loads on demand, after both sides ran, and is not one.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true, viaOnly: { dependencyTypesNot: ["type-only", "dynamic-import"] } }
    },
    ...LAYERS.slice(0, -1).map((layer) => ({
      name: `${layer}-imports-down`,
      comment: `src/${layer}/ may import only the layers below it (${LAYERS.slice(0, LAYERS.indexOf(layer)).join(", ") || "none"}); code that must run above it belongs above it, or is handed down as a service.`,
      severity: "error",
      from: { path: `^src/${layer}/` },
      to: { path: folders(above(layer)), pathNot: EXCEPTIONS.filter((e) => new RegExp(`^\\^src/${layer}/`).test(e.from)).map((e) => e.to), dependencyTypesNot: ["type-only"] }
    })),
    {
      name: "domain-is-pure",
      comment: "src/domain/ (schemas, ids, enums, the canonical model) imports nothing of the gateway, not even types.",
      severity: "error",
      from: { path: "^src/domain/" },
      to: { path: "^src/", pathNot: "^src/domain/" }
    },
    {
      name: "kernel-knows-no-feature",
      comment: "src/kernel/ names no feature: not even a type from the inference routes, the management plane or the server.",
      severity: "error",
      from: { path: "^src/kernel/" },
      to: { path: folders(["inference", "management", "server"]) }
    },
    {
      name: "kernel-knows-no-transport",
      comment: "src/kernel/ knows no transport: no node:http, net or stream types; the request context is the gateway's, not node's.",
      severity: "error",
      from: { path: "^src/kernel/" },
      to: { dependencyTypes: ["core"], path: "^(node:)?(http|https|http2|net|tls|stream)$" }
    },
    {
      name: "not-to-unresolvable",
      severity: "error",
      from: { path: "^src/" },
      to: { couldNotResolve: true }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "\\.d\\.ts$" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.build.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"], extensions: [".ts", ".js"] },
    cache: { folder: "node_modules/.cache/dependency-cruiser", strategy: "content" }
  }
}
