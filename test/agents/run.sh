#!/usr/bin/env bash
# The coding-agent end-to-end test (`npm run test:agents`): installs the pinned agents (needs the
# npm registry), then runs the test in a private network namespace with only loopback, so that
# nothing an agent tries can leave the machine. Not part of `npm test`: the agents are large.
set -euo pipefail
cd "$(dirname "$0")/../.."
npm run build >/dev/null
export GATEWAY_AGENTS_DIR="$(bash test/agents/install.sh | tail -n 1)"
if [ -z "${GATEWAY_AGENTS_ISOLATED:-}" ] && unshare -n true 2>/dev/null; then
  exec unshare -n env GATEWAY_AGENTS_ISOLATED=1 bash -c 'ip link set lo up && exec npx vitest run --config vitest.agents.config.ts'
fi
echo "warning: no private network namespace available (unshare -n needs root); running with the agents' offline settings only" >&2
exec npx vitest run --config vitest.agents.config.ts
