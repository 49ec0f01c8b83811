// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { ServerConnection } from '@jupyterlab/services';

import { ToolTerminalSessions } from '../sessions';
import type { ISessionModel, IToolInstance } from '../tokens';

/**
 * A recorded request of the fake fetch.
 */
export interface IRecordedRequest {
  url: string;
  method: string;
  headers: Headers;
  body: string;
}

/**
 * A canned answer of the fake fetch.
 */
export interface IFakeAnswer {
  status: number;
  body?: unknown;
}

/**
 * A fake WebSocket that records what the client sends and lets the test
 * drive the server side.
 */
export class FakeWebSocket {
  static instances: FakeWebSocket[] = [];

  static get last(): FakeWebSocket {
    return FakeWebSocket.instances[FakeWebSocket.instances.length - 1];
  }

  constructor(url: string) {
    this.url = url;
    FakeWebSocket.instances.push(this);
  }

  readonly url: string;
  readyState = 0;
  sent: unknown[] = [];
  closed = false;
  closeCode: number | undefined = undefined;
  onopen: ((event: Event) => void) | null = null;
  onmessage: ((event: MessageEvent) => void) | null = null;
  onerror: ((event: Event) => void) | null = null;
  onclose: ((event: CloseEvent) => void) | null = null;

  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }

  close(code?: number): void {
    this.closed = true;
    this.closeCode = code;
    this.readyState = 3;
  }

  /** Server side: accept the upgrade. */
  open(): void {
    this.readyState = 1;
    this.onopen?.(new Event('open'));
  }

  /** Server side: send a frame (a list is JSON-encoded). */
  receive(frame: unknown): void {
    const data = typeof frame === 'string' ? frame : JSON.stringify(frame);
    this.onmessage?.(new MessageEvent('message', { data }));
  }

  /** Server side: refuse the upgrade (403) or fail. */
  fail(): void {
    this.onerror?.(new Event('error'));
    this.drop();
  }

  /** Server side: close the socket (with a close code). */
  drop(code = 1006): void {
    this.readyState = 3;
    this.onclose?.(Object.assign(new Event('close'), { code }) as CloseEvent);
  }
}

/**
 * Make server settings under a JupyterHub-like prefix with a fake fetch and
 * a fake WebSocket.
 */
export function makeSettings(
  answers: IFakeAnswer[] = [],
  overrides: Partial<ServerConnection.ISettings> = {}
): { settings: ServerConnection.ISettings; requests: IRecordedRequest[] } {
  const requests: IRecordedRequest[] = [];
  const queue = [...answers];
  const fakeFetch = async (request: Request): Promise<Response> => {
    requests.push({
      url: request.url,
      method: request.method,
      headers: request.headers,
      body: request.body === null ? '' : await request.text()
    });
    const answer = queue.shift() ?? { status: 200, body: [] };
    const body =
      answer.body === undefined || answer.status === 204
        ? null
        : JSON.stringify(answer.body);
    return new Response(body, {
      status: answer.status,
      headers: { 'Content-Type': 'application/json' }
    });
  };
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/user/alice/',
    wsUrl: 'ws://localhost:8888/user/alice/',
    token: '',
    appendToken: false,
    fetch: fakeFetch as typeof fetch,
    WebSocket: FakeWebSocket as unknown as typeof WebSocket,
    ...overrides
  });
  return { settings, requests };
}

/**
 * A session model of the page on test server settings, not polling.
 */
export function makeSessions(
  serverSettings: ServerConnection.ISettings
): ToolTerminalSessions {
  return new ToolTerminalSessions({ serverSettings, auto: false });
}

/**
 * A session model as the server returns it.
 */
export function sessionModel(id: string, instance = 'pg-1'): ISessionModel {
  return {
    id,
    instance,
    tool: 'postgres',
    created: '2026-01-01T00:00:00Z',
    last_activity: '2026-01-01T00:00:00Z',
    clients: 0
  };
}

/**
 * The path of a recorded request, without the cache-busting query.
 */
export function pathOf(request: IRecordedRequest): string {
  const url = new URL(request.url);
  return url.pathname;
}

/**
 * Resolve once a condition holds, letting pending promises and timers run
 * in between (at most `limit` turns of the event loop).
 */
export async function until(
  condition: () => boolean,
  limit = 200
): Promise<void> {
  for (let turn = 0; turn < limit; turn++) {
    if (condition()) {
      return;
    }
    await new Promise(resolve => setTimeout(resolve, 0));
  }
  throw new Error('condition not reached');
}

/**
 * A tool instance as the server lists it.
 */
export function instanceModel(id = 'pg-1', status = 'running'): IToolInstance {
  return {
    id,
    tool: 'postgres',
    display_name: 'PostgreSQL',
    status,
    has_startup_command: false
  };
}

/**
 * jsdom draws nothing: keep xterm's canvas renderer from logging that.
 */
export function quietCanvas(): void {
  jest.spyOn(HTMLCanvasElement.prototype, 'getContext').mockReturnValue(null);
}

/**
 * Answer the tool-terminal service's login frame as the service's page does
 * once the Hub let the browser through: it posts the user and the XSRF token.
 *
 * @returns The URL the frame was loading.
 */
export async function answerLoginFrame(
  login: { user: string; xsrf: string } = { user: 'alice', xsrf: 'xsrf-1' }
): Promise<string> {
  let frame: HTMLIFrameElement | null = null;
  await until(() => {
    frame = document.querySelector('iframe.jp-ToolTerminal-loginFrame');
    return frame !== null;
  });
  const loading = frame as unknown as HTMLIFrameElement;
  window.dispatchEvent(
    new MessageEvent('message', {
      origin: window.location.origin,
      source: loading.contentWindow,
      data: { type: 'jupyter-tool-terminal:logged-in', ...login }
    })
  );
  return loading.src;
}
