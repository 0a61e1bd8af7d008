// Kafka's own reading of client.properties files, printed as JSON lines for the parity test.
// Compiled by tests/kafka/test_java_properties_parity.py into a temporary directory at test time
// (never committed as build output); runs against the kafka-clients 4.4 jar of the launcher's cache.
//
//   java PropertiesParity load FILE...      one JSON line per file: its properties and JAAS parses
//   java PropertiesParity store IN OUT      IN loaded, then written to OUT by Properties.store
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.common.security.JaasContext;

public class PropertiesParity {
    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.') {
                b.append(c);
            } else {
                b.append(String.format("\\u%04x", (int) c));
            }
        }
        return b.append('"').toString();
    }

    static String flag(AppConfigurationEntry.LoginModuleControlFlag f) {
        if (f == AppConfigurationEntry.LoginModuleControlFlag.REQUIRED) return "REQUIRED";
        if (f == AppConfigurationEntry.LoginModuleControlFlag.REQUISITE) return "REQUISITE";
        if (f == AppConfigurationEntry.LoginModuleControlFlag.SUFFICIENT) return "SUFFICIENT";
        return "OPTIONAL";
    }

    static String jaas(String value) {
        List<AppConfigurationEntry> entries;
        try {
            entries = JaasContext.loadClientContext(Map.of("sasl.jaas.config", new Password(value)))
                .configurationEntries();
        } catch (RuntimeException e) {
            return "{\"refused\":" + json(e.getClass().getSimpleName()) + "}";
        }
        List<String> out = new ArrayList<>();
        for (AppConfigurationEntry entry : entries) {
            List<String> opts = new ArrayList<>();
            for (Map.Entry<String, ?> o : new TreeMap<String, Object>(entry.getOptions()).entrySet()) {
                opts.add(json(o.getKey()) + ":" + json(String.valueOf(o.getValue())));
            }
            out.add("{\"module\":" + json(entry.getLoginModuleName()) + ",\"flag\":"
                + json(flag(entry.getControlFlag())) + ",\"options\":{" + String.join(",", opts) + "}}");
        }
        return "{\"entries\":[" + String.join(",", out) + "]}";
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("store")) {
            Properties p = new Properties();
            try (InputStream in = new FileInputStream(args[1])) {
                p.load(in);
            }
            try (OutputStream out = new FileOutputStream(args[2])) {
                p.store(out, "written by java.util.Properties.store");
            }
            return;
        }
        for (int i = 1; i < args.length; i++) {
            Properties p = new Properties();
            String error = null;
            try (InputStream in = new FileInputStream(args[i])) {
                p.load(in);
            } catch (IllegalArgumentException e) {
                error = e.getClass().getSimpleName();
            }
            List<String> props = new ArrayList<>();
            List<String> jaas = new ArrayList<>();
            for (String key : new java.util.TreeSet<>(p.stringPropertyNames())) {
                props.add(json(key) + ":" + json(p.getProperty(key)));
                if (key.endsWith("jaas.config")) {
                    jaas.add(json(key) + ":" + jaas(p.getProperty(key)));
                }
            }
            System.out.println("{\"file\":" + json(args[i]) + ",\"error\":" + (error == null ? "null" : json(error))
                + ",\"properties\":{" + String.join(",", props) + "},\"jaas\":{" + String.join(",", jaas) + "}}");
        }
    }
}
