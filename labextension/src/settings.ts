// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { ITerminal } from '@jupyterlab/terminal';

import { serviceFetch, serviceLogin } from './login';
import type { FetchFunction, IServiceLogin } from './login';
import { TERMINAL_SETTINGS_PLUGIN } from './tokens';

/**
 * The page-config option carrying `ToolTerminalApp.service_url`: the URL of
 * the JupyterHub tool-terminal service that serves this user's tool terminals.
 */
export const SERVICE_URL_OPTION = 'toolTerminalServiceUrl';

/**
 * Settings that point at a JupyterHub tool-terminal service, with how to log
 * in there.
 */
const serviceSettings = new WeakMap<
  ServerConnection.ISettings,
  () => Promise<IServiceLogin>
>();

/**
 * The server settings of the tool terminals.
 *
 * Without a `service_url` these are the page's own server settings. With
 * one, REST calls and WebSockets go to the service, on the same origin
 * behind the Hub's proxy, authenticated by the service's own login cookie
 * (got through the service's OAuth flow with the Hub, see
 * {@link serviceLogin}) and, for REST calls, the service's XSRF token. The
 * page's own token is never sent there: it belongs to the user's server,
 * and the service refuses it.
 *
 * @param base - The page's own server settings.
 * @param serviceUrl - The service URL (default: from the page config).
 * @returns The settings the tool terminals use.
 */
export function toolTerminalSettings(
  base: ServerConnection.ISettings,
  serviceUrl: string = PageConfig.getOption(SERVICE_URL_OPTION)
): ServerConnection.ISettings {
  if (!serviceUrl) {
    return base;
  }
  const baseUrl = URLExt.normalize(
    serviceUrl.endsWith('/') ? serviceUrl : `${serviceUrl}/`
  );
  const pageFetch = base.fetch as FetchFunction;
  const settings = ServerConnection.makeSettings({
    ...base,
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, 'ws'),
    token: '',
    appendToken: false,
    fetch: serviceFetch(baseUrl, pageFetch) as typeof fetch
  });
  serviceSettings.set(settings, () => serviceLogin(baseUrl));
  return settings;
}

/**
 * Whether settings point at a JupyterHub tool-terminal service, whose
 * WebSockets need its login cookie first.
 *
 * @param settings - Server settings.
 * @returns `true` for settings made by {@link toolTerminalSettings} from a
 *   service URL.
 */
export function isServiceSettings(
  settings: ServerConnection.ISettings
): boolean {
  return serviceSettings.has(settings);
}

/**
 * Make sure the browser is logged in at the service the settings point at
 * (nothing to do for the page's own server).
 *
 * @param settings - The tool terminals' server settings.
 */
export async function ensureServiceLogin(
  settings: ServerConnection.ISettings
): Promise<void> {
  const login = serviceSettings.get(settings);
  if (login !== undefined) {
    await login();
  }
}

/**
 * Follow the user's JupyterLab terminal settings (font, theme, scrollback,
 * screen reader mode...) in the tool terminals, now and when they change.
 *
 * @param settingRegistry - The setting registry.
 * @param options - The options new terminals get: every setting is set in
 *   it, in place.
 * @param changed - Called with each setting, to apply it to the open
 *   terminals.
 */
export function followTerminalSettings(
  settingRegistry: ISettingRegistry,
  options: Partial<ITerminal.IOptions>,
  changed: <K extends keyof ITerminal.IOptions>(
    key: K,
    value: ITerminal.IOptions[K]
  ) => void
): void {
  const apply = (settings: ISettingRegistry.ISettings): void => {
    const composite = settings.composite as Partial<ITerminal.IOptions>;
    for (const key of Object.keys(composite) as Array<
      keyof ITerminal.IOptions
    >) {
      const value = composite[key];
      if (value === undefined) {
        continue;
      }
      (options as Record<string, unknown>)[key] = value;
      changed(key, value);
    }
  };
  settingRegistry
    .load(TERMINAL_SETTINGS_PLUGIN)
    .then(settings => {
      apply(settings);
      settings.changed.connect(apply);
    })
    .catch(() => {
      // JupyterLab's terminal extension is disabled: use its defaults.
    });
}
