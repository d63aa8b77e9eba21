// Preloaded into the conformance suite (NODE_OPTIONS=--require) when the server under test
// needs a bearer token: the suite has no option to send one. Every request Node makes
// (fetch, and undici's own request(), both through the global dispatcher) gets
// "Authorization: Bearer $MCP_BEARER_TOKEN"; the suite itself is unchanged.
"use strict";
const token = process.env.MCP_BEARER_TOKEN;
if (token) {
  const key = Symbol.for("undici.globalDispatcher.1");
  void globalThis.Headers; // loads Node's bundled undici, which installs its global dispatcher
  const inner = globalThis[key];
  if (!inner) throw new Error("bearer_token.cjs: no global undici dispatcher to wrap");
  const withToken = (headers) => {
    if (Array.isArray(headers)) {
      return Array.isArray(headers[0])
        ? [...headers, ["authorization", `Bearer ${token}`]]
        : [...headers, "authorization", `Bearer ${token}`];
    }
    return { ...(headers || {}), authorization: `Bearer ${token}` };
  };
  const wrapper = Object.create(inner);
  wrapper.dispatch = (opts, handler) => inner.dispatch({ ...opts, headers: withToken(opts.headers) }, handler);
  globalThis[key] = wrapper;
}
