# The gateway's addon (native/README.md: the transparent capture's sockets, the writer thread's policy): C and Node-API only, Linux only.
# Built by native/build.mjs (npm install, npm run build:native) into build/Release/gateway_tproxy.node.
{
  "targets": [
    {
      "target_name": "gateway_tproxy",
      "sources": ["src/tproxy.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-O2"]
    }
  ]
}
