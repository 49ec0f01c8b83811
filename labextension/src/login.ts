// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { URLExt } from '@jupyterlab/coreutils';

import { URL_NAMESPACE } from './tokens';

/**
 * What a popup login posts to the page that opened it (the service's
 * `POPUP_LOGIN_MESSAGE`).
 */
export const POPUP_LOGIN_MESSAGE = 'jupyter-tool-terminal:logged-in';

/**
 * The service's answer once the browser is logged in there.
 */
export interface IServiceLogin {
  /**
   * The user the service knows the browser as.
   */
  user: string;
  /**
   * The service's XSRF token, for cookie-authenticated REST calls.
   */
  xsrf: string;
}

/**
 * A fetch function as `ServerConnection.ISettings.fetch` is.
 */
export type FetchFunction = (request: Request) => Promise<Response>;

/**
 * Logins to services already asked for, by service base URL.
 */
const logins = new Map<string, Promise<IServiceLogin>>();

/**
 * Log the browser in at a JupyterHub tool-terminal service, through the
 * service's own OAuth flow with the Hub.
 *
 * The service's `tool-terminal/login` page redirects a browser that has no
 * login cookie of the service through the Hub (which knows the user by the
 * Hub's own cookie) and back to the service, whose OAuth callback sets its
 * HttpOnly, SameSite login cookie; the page then posts the user and the
 * service's XSRF token to this page. It is loaded in a hidden frame: the
 * Hub lets a navigation through its OAuth flow, not a script's `fetch`.
 * If the Hub wants the user to confirm (or to log in again), nothing comes
 * from the frame, and a window of its own asks them. No token of the page's
 * own server is used: what a user's server receives is never good at the
 * service. Asked once per page and service, again after a failure or
 * {@link forgetServiceLogin}.
 *
 * @param baseUrl - The service's base URL (ending in `/`).
 * @returns The user and the service's XSRF token.
 */
export function serviceLogin(baseUrl: string): Promise<IServiceLogin> {
  let login = logins.get(baseUrl);
  if (login === undefined) {
    login = Private.logIn(baseUrl);
    logins.set(baseUrl, login);
    login.catch(() => logins.delete(baseUrl));
  }
  return login;
}

/**
 * Forget a service login (its cookie was refused: log in again next time).
 *
 * @param baseUrl - The service's base URL.
 */
export function forgetServiceLogin(baseUrl: string): void {
  logins.delete(baseUrl);
}

/**
 * A fetch for REST calls to a service: logged in first, with the service's
 * XSRF token and without the page's token (the service refuses it anyway).
 * A call refused with 403 logs in again once, for a login cookie that
 * expired or was revoked.
 *
 * @param baseUrl - The service's base URL.
 * @param fetchFunction - The page's fetch.
 * @returns A fetch function for the service's settings.
 */
export function serviceFetch(
  baseUrl: string,
  fetchFunction: FetchFunction
): FetchFunction {
  const send = async (request: Request): Promise<Response> => {
    const login = await serviceLogin(baseUrl);
    const authenticated = new Request(request);
    authenticated.headers.delete('Authorization');
    authenticated.headers.set('X-XSRFToken', login.xsrf);
    return fetchFunction(authenticated);
  };
  return async (request: Request): Promise<Response> => {
    const response = await send(request.clone());
    if (response.status !== 403) {
      return response;
    }
    forgetServiceLogin(baseUrl);
    return send(request);
  };
}

/**
 * Milliseconds the hidden frame has to log in before a window asks the user.
 */
export const FRAME_LOGIN_TIMEOUT = 15000;

/**
 * Module internals.
 */
namespace Private {
  /**
   * Log in: in a hidden frame if the Hub lets the browser through, else in a
   * window the user sees.
   */
  export async function logIn(baseUrl: string): Promise<IServiceLogin> {
    const url = URLExt.join(baseUrl, URL_NAMESPACE, 'login') + '?popup=1';
    const silent = await inFrame(url);
    if (silent !== null) {
      return silent;
    }
    return inWindow(url);
  }

  /**
   * The login a window or frame of the service's posts to this page, if
   * it is one (same origin, from `source`, well-formed).
   */
  function loginFrom(
    event: MessageEvent,
    source: MessageEventSource | null
  ): IServiceLogin | null {
    const data = event.data as Partial<IServiceLogin> & { type?: unknown };
    if (
      source === null ||
      event.source !== source ||
      event.origin !== window.location.origin ||
      data?.type !== POPUP_LOGIN_MESSAGE ||
      typeof data.user !== 'string' ||
      typeof data.xsrf !== 'string'
    ) {
      return null;
    }
    return { user: data.user, xsrf: data.xsrf };
  }

  /**
   * Log in in a hidden frame; `null` if it says nothing in time (the Hub
   * shows a page that asks the user something).
   */
  function inFrame(url: string): Promise<IServiceLogin | null> {
    return new Promise(resolve => {
      const frame = document.createElement('iframe');
      frame.hidden = true;
      frame.className = 'jp-ToolTerminal-loginFrame';
      const done = (login: IServiceLogin | null): void => {
        window.removeEventListener('message', onMessage);
        window.clearTimeout(timer);
        frame.remove();
        resolve(login);
      };
      const onMessage = (event: MessageEvent): void => {
        const login = loginFrom(event, frame.contentWindow);
        if (login !== null) {
          done(login);
        }
      };
      const timer = window.setTimeout(() => done(null), FRAME_LOGIN_TIMEOUT);
      window.addEventListener('message', onMessage);
      frame.src = url;
      document.body.appendChild(frame);
    });
  }

  /**
   * Log in in a window of its own; rejects if the browser blocks it or the
   * user closes it before the login is done.
   */
  function inWindow(url: string): Promise<IServiceLogin> {
    return new Promise((resolve, reject) => {
      const popup = window.open(
        url,
        'jupyter-tool-terminal-login',
        'popup,width=640,height=720'
      );
      if (popup === null) {
        reject(
          new Error(
            'The tool terminals need you to log in, and the browser blocked ' +
              `the login window: allow popups for this site, or open ${url}.`
          )
        );
        return;
      }
      const finish = (): void => {
        window.removeEventListener('message', onMessage);
        window.clearInterval(watch);
      };
      const onMessage = (event: MessageEvent): void => {
        const login = loginFrom(event, popup);
        if (login !== null) {
          finish();
          resolve(login);
        }
      };
      window.addEventListener('message', onMessage);
      // A window the user closed sends nothing.
      const watch = window.setInterval(() => {
        if (popup.closed) {
          finish();
          reject(new Error('The login window of the tool terminals closed.'));
        }
      }, 500);
    });
  }
}
