// Loader hooks of moduleTrace.mjs: every module URL loaded is posted to the main thread.
let port

export function initialize(data) {
  port = data.port
}

export async function load(url, context, next) {
  port.postMessage(url)
  return next(url, context)
}
