"""Regular expressions read safely: character sets as ranges (charset.py) and a regex subset parsed into
automata (regex.py), for the call grammar (constrain/) and the schema validators (schema/) alike."""
