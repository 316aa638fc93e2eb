// MCP Apps: a tool's own page (an `app` event), shown in a frame that has no origin of its own
// (sandbox="allow-scripts", never allow-same-origin: no access to this page, its cookies or its storage, and
// no navigating it) under a Content-Security-Policy that forbids every fetch. The page talks to it only by
// postMessage, JSON-RPC as the extension defines it, and grants it its own call's arguments and result and
// the tool's definition; `host.callTool` (the studio), when given, carries its tools/call requests to the
// harness, which allows only its own server's app tools, through the schema and the policy. Everything else
// it asks for is refused, and the page says so under the frame.
const APP_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; " +
  "font-src data:; media-src data:; form-action 'none'; base-uri 'none'";
const APP_PROTOCOL = '2026-01-26';

function mountApp(box, e, host) {
  const frame = document.createElement('iframe');
  frame.className = 'app';
  frame.setAttribute('sandbox', 'allow-scripts');
  frame.setAttribute('referrerpolicy', 'no-referrer');
  frame.title = vis('the app of ' + e.server + '/' + e.tool + ' (' + e.uri + ')');
  const said = el('ul', 'app-log');
  const note = text => {
    said.append(el('li', null, String(text).slice(0, 500)));
    while (said.children.length > 100) said.firstChild.remove();
  };
  const post = message => { if (frame.contentWindow) frame.contentWindow.postMessage(message, '*'); };
  const reply = (id, result) => post({jsonrpc: '2.0', id: id, result: result});
  const refuse = (id, code, message) => post({jsonrpc: '2.0', id: id, error: {code: code, message: message}});
  let initialized = false;
  function onMessage(event) {
    if (event.source !== frame.contentWindow) return;  // this frame's messages only
    const m = event.data;
    if (!m || typeof m !== 'object' || m.jsonrpc !== '2.0' || typeof m.method !== 'string') return;
    const params = m.params && typeof m.params === 'object' ? m.params : {};
    const id = m.id;
    switch (m.method) {
      case 'ui/initialize':
        reply(id, {protocolVersion: APP_PROTOCOL, hostInfo: {name: host.name, version: '1'},
                   hostCapabilities: host.callTool ? {serverTools: {}} : {},
                   hostContext: {toolInfo: {tool: e.definition}, theme: 'light', displayMode: 'inline',
                                 availableDisplayModes: ['inline'], platform: 'web'}});
        return;
      case 'ui/notifications/initialized':
        if (initialized) return;
        initialized = true;
        post({jsonrpc: '2.0', method: 'ui/notifications/tool-input', params: {arguments: e.arguments}});
        post({jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: e.result});
        return;
      case 'notifications/message':
        note('the app says: ' + (typeof params.data === 'string' ? params.data : JSON.stringify(params.data)));
        return;
      case 'ping':
        if (id !== undefined) reply(id, {});
        return;
      case 'tools/call': {
        if (id === undefined) return;
        const name = String(params.name);
        if (!host.callTool) {
          note('asked to call ' + name + ': refused (a replay calls nothing)');
          refuse(id, -32000, 'this page is a replay: it calls no tool');
          return;
        }
        host.callTool(e.server, e.tool, name, params.arguments || {}).then(answer => {
          if (answer.result) { note('called ' + name + ' (through the harness)'); reply(id, answer.result); }
          else { note('asked to call ' + name + ': refused: ' + answer.error); refuse(id, -32000, answer.error); }
        });
        return;
      }
      default:
        if (id === undefined) return;
        note('asked for ' + m.method + ': refused (not granted to apps here)');
        refuse(id, -32601, m.method + ' is not granted to apps by this host');
    }
  }
  window.addEventListener('message', onMessage);
  if (host.url) frame.src = host.url;  // served with the policy as a header (the studio: its own page's policy
  // would bind a srcdoc frame too); else the policy first in the document: a <meta> before the page's own
  // markup lands in its head, and the viewer's own policy (no fetch at all) binds the frame as well
  else frame.srcdoc = '<meta http-equiv="Content-Security-Policy" content="' + APP_CSP + '">' + e.html;
  box.append(frame, said);
  return () => window.removeEventListener('message', onMessage);
}
